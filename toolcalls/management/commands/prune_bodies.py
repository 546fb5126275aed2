"""``manage.py prune_bodies [--older-than-days N] [--dry-run]``: retention of model traffic."""

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from toolcalls.actors import RETENTION
from toolcalls.management.base import CallgateCommand
from toolcalls.services.retention import bodies_prunable, bodies_prune

#: Operations between two progress lines on stderr.
PROGRESS_EVERY = 1000


class Command(CallgateCommand):
    help = (
        "Remove the request bodies, wire replies and conversation of operations that ended "
        "more than --older-than-days ago (default CALLGATE_BODY_RETENTION_DAYS). Calls, "
        "results, digests, approvals and the audit chain stay and still verify."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-days",
            type=int,
            default=None,
            metavar="N",
            help="Prune operations that ended more than N days ago.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would go; change nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days = options["older_than_days"]
        days = settings.CALLGATE_BODY_RETENTION_DAYS if days is None else days
        if days < 0:
            raise CommandError("--older-than-days must be 0 or more")
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
