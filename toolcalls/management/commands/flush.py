"""``manage.py flush``, Django's, saying why PostgreSQL refuses it when the audit trail does."""

from typing import Any

from django.core.management.base import CommandError
from django.core.management.commands import flush
from django.db import connections

#: The start of what the audit table's TRUNCATE trigger raises (toolcalls migration 0012).
_REFUSED = "audit events are append-only"


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        try:
            super().handle(**options)
        except CommandError as exc:
            if _REFUSED not in str(exc.__cause__):
                raise
            name = connections[options["database"]].settings_dict["NAME"]
            raise CommandError(
                f"Database {name} couldn't be flushed: audit events are append-only, and "
                "PostgreSQL's trigger on toolcalls_auditevent refuses the TRUNCATE flush sends "
                "(README, Running with PostgreSQL); for an empty database, drop and create it, "
                "then migrate"
            ) from None
