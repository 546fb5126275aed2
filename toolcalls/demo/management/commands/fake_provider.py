"""``manage.py fake_provider --port P [--host H] [DIR ...]``: every API family's endpoint on one
local port, answering from scenario files, for the live transport without a provider account."""

import threading
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from providers.fake_server import ReplayServer
from toolcalls.demo.scenario import BUNDLED_DIR, scenario_read
from toolcalls.management.base import CallgateCommand, port_number

#: The providers whose SDKs the live transport uses (``CALLGATE_<PROVIDER>_BASE_URL``).
PROVIDERS = ("openai", "anthropic", "google")


class Command(CallgateCommand):
    help = (
        "Serve the five API families' endpoints (OpenAI Responses and Chat Completions, "
        "Anthropic Messages, Gemini generateContent and Interactions) from scenario files "
        "(docs/scenarios.md): each file is a model named after it, in its family, and answers "
        "one operation at a time, from its first reply again once it has served its last. Point "
        "CALLGATE_<PROVIDER>_BASE_URL at it (printed at start) and use the live transport."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=port_number, required=True)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "dirs",
            nargs="*",
            type=Path,
            help=f"directories of scenario files, searched recursively (default: {BUNDLED_DIR})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        server = ReplayServer(host=options["host"], port_wanted=options["port"], rewind=True)
        served = []
        for path in _scenario_paths(options["dirs"] or [BUNDLED_DIR]):
            scenario = scenario_read(path)
            server.script(model=path.stem, family=scenario["family"], replies=scenario["replies"])
            served.append(f"model {path.stem!r} of {scenario['family']}: {path}")
        try:
            server.start()
        except OSError as exc:  # the port is taken, or the host is not this machine's
            where = f"{options['host']}:{options['port']}"
            raise CommandError(f"cannot listen on {where}: {exc.strerror or exc}") from None
        for line in served:
            self.stdout.write(line)
        for provider in PROVIDERS:
            self.stdout.write(f"CALLGATE_{provider.upper()}_BASE_URL={server.base_url(provider)}")
        self.stdout.write("Serving; Ctrl-C to stop.")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()


def _scenario_paths(dirs: list[Path]) -> list[Path]:
    """Every ``*.json`` under each of ``dirs``, sorted; a directory that is missing or holds none
    ends the command, since it would serve no model and say nothing."""
    paths = []
    for directory in dirs:
        if not directory.is_dir():
            raise CommandError(f"{directory}: no such directory")
        found = sorted(directory.rglob("*.json"))
        if not found:
            raise CommandError(f"{directory}: no scenario files (*.json) in it")
        paths.extend(found)
    return sorted(paths)
