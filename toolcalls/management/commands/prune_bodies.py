"""``manage.py prune_bodies [--older-than-days N] [--dry-run]``: retention of model traffic."""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from toolcalls.actors import RETENTION
from toolcalls.management.base import CallgateCommand, whole_number
from toolcalls.services.retention import bodies_prunable, bodies_prune

#: Operations between two progress lines on stderr.
PROGRESS_EVERY = 1000
#: The longest retention, a hundred years: a day count any date can be taken back by.
MAX_DAYS = 36500
_days = whole_number(low=0, high=MAX_DAYS, unit="days")


class Command(CallgateCommand):
    help = (
        "Remove the request bodies, wire replies and conversation of operations that ended "
        "more than --older-than-days ago (default CALLGATE_BODY_RETENTION_DAYS; 0 to "
        f"{MAX_DAYS}). Calls, results, digests, approvals and the audit chain stay and still "
        "verify."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-days",
            type=_days,
            default=None,
            metavar="N",
            help="Prune operations that ended more than N days ago.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would go; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than_days"]
        days = _retention_days() if days is None else days
        ended_before = timezone.now() - timedelta(days=days)
        pks = bodies_prunable(ended_before=ended_before)
        if options["dry_run"]:
            self.stdout.write(f"{len(pks)} operations ended more than {days} days ago")
            return
        pruned = 0
        for number, pk in enumerate(pks, start=1):
            pruned += bodies_prune(operation_pk=pk, ended_before=ended_before, actor=RETENTION)
            if number % PROGRESS_EVERY == 0:
                self.stderr.write(f"… {number} of {len(pks)} operations")
        self.stdout.write(f"pruned {pruned} operations that ended more than {days} days ago")


def _retention_days() -> int:
    """``CALLGATE_BODY_RETENTION_DAYS``, held to the option's range; a refusal names the setting,
    since no option was given."""
    days = settings.CALLGATE_BODY_RETENTION_DAYS
    if not 0 <= days <= MAX_DAYS:
        message = f"CALLGATE_BODY_RETENTION_DAYS must be from 0 to {MAX_DAYS} days, not {days}"
        raise CommandError(f"{message} (the default of --older-than-days)")
    return days
