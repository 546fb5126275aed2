"""``manage.py check_wire_fixtures DIR [DIR ...]``: run the adapters over wire-fixture cases."""

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from providers.conformance import case_files, check_file
from toolcalls.management.base import CallgateCommand


class Command(CallgateCommand):
    help = (
        "Parse every case file (format: tests/fixtures/README.md) under the given directories "
        "with its family's adapter and compare with its expect block. Prints PASS/FAIL per case "
        "and a total; exits 1 when any case fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directories", nargs="+", type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        passed = failed = 0
        for directory in options["directories"]:
            if not directory.is_dir():
                raise CommandError(f"{directory}: not a directory")
            cases = list(case_files(directory))
            if not cases:
                # A mistyped or empty corpus must not pass a check that looked at nothing.
                raise CommandError(f"{directory}: no case files")
            for path in cases:
                result = check_file(path)
                if result.passed:
                    passed += 1
                    self.stdout.write(f"PASS {result.case_id}")
                else:
                    failed += 1
                    self.stdout.write(f"FAIL {result.case_id}: {'; '.join(result.problems)}")
        self.stdout.write(f"{passed} passed, {failed} failed")
        if failed:
            raise SystemExit(1)
