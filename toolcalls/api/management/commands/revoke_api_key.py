"""``manage.py revoke_api_key KEY``: revoke a key (and deactivate its service identity)."""

from typing import Any

from django.core.management.base import CommandParser

from toolcalls.api.auth import api_keys_named, api_keys_revoke
from toolcalls.management.base import CallgateCommand


class Command(CallgateCommand):
    help = (
        "Revoke an API key, named by its prefix as list_api_keys shows it, by cg_<prefix>, or "
        "by the whole key cg_<prefix>_<secret>. Its service identity is deactivated too: none "
        "of its calls still waiting for a person runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", metavar="KEY", help="PREFIX, cg_PREFIX or the whole key")

    def handle(self, *args: Any, **options: Any) -> None:
        revoked = api_keys_revoke(keys=api_keys_named(reference=options["key"]))
        self.stdout.write("revoked" if revoked else "already revoked")
