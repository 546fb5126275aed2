"""``manage.py verify_audit_chain [--operation ID]``: recompute and follow every audit chain."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.management.base import CallgateCommand
from toolcalls.models import Operation
from toolcalls.services.audit_verify import audit_chain_walk

#: Events between two progress lines on stderr.
PROGRESS_EVERY = 10_000


class Command(CallgateCommand):
    help = (
        "Verify the hash-chained audit trail: every event's hash, every link, no gap in the "
        "numbering, and each operation's head. Prints one line per broken operation naming its "
        "first broken link and exits 1; prints OK and exits 0 when every chain is intact."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--operation", metavar="ID", help="Only this operation (op_…).")

    def handle(self, *args: Any, **options: Any) -> None:
        operations = events = broken = 0
        try:
            for result in audit_chain_walk(operation_public_id=options["operation"]):
                if (events + result.events) // PROGRESS_EVERY > events // PROGRESS_EVERY:
                    self.stderr.write(
                        f"… {events + result.events} events, {operations + 1} operations"
                    )
                operations += 1
                events += result.events
                if result.first_break is not None:
                    broken += 1
                    self.stdout.write(f"BROKEN {result.first_break}")
        except Operation.DoesNotExist:
            raise CommandError(f"unknown operation: {options['operation']}") from None
        if broken:
            self.stdout.write(
                f"FAILED: {broken} of {operations} operations broken, {events} events read"
            )
            raise SystemExit(1)
        self.stdout.write(f"OK: {operations} operations, {events} events verified")
