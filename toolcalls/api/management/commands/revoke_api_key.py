"""``manage.py revoke_api_key PREFIX``: revoke a key (and deactivate its service identity)."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.api.auth import api_keys_revoke
from toolcalls.api.models import ApiKey
from toolcalls.management.base import CallgateCommand


class Command(CallgateCommand):
    help = (
        "Revoke an API key by its prefix (cg_<prefix>_…, as list_api_keys shows it). Its "
        "service identity is deactivated too: none of its calls still waiting for a person runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("prefix")

    def handle(self, *args: Any, **options: Any) -> None:
        keys = ApiKey.objects.filter(prefix=options["prefix"])
        if not keys.exists():
            raise CommandError(f"no API key with prefix {options['prefix']!r}")
        revoked = api_keys_revoke(keys=keys)
        self.stdout.write("revoked" if revoked else "already revoked")
