"""``manage.py list_api_keys [--tenant SLUG]``: one line per key (never a secret)."""

from typing import Any

from django.core.management.base import CommandParser

from toolcalls.actors import Actor
from toolcalls.api.models import ApiKey
from toolcalls.management.base import CallgateCommand


class Command(CallgateCommand):
    help = (
        "List API keys: prefix (cg_<prefix>_…), tenant, name as the audit trail names it, "
        "scopes, created, last used, revoked. Secrets are never stored, so never shown."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="only this tenant's (slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        keys = ApiKey.objects.select_related("tenant").order_by("tenant__slug", "created_at")
        if options["tenant"]:
            keys = keys.filter(tenant=self.tenant(options["tenant"]))
        for key in keys:
            self.stdout.write(
                "\t".join(
                    [
                        key.prefix,
                        key.tenant.slug,
                        Actor.service(key.name).audit_name,
                        ",".join(key.scopes),
                        f"created {_when(key.created_at)}",
                        f"used {_when(key.last_used_at)}",
                        f"revoked {_when(key.revoked_at)}",
                    ]
                )
            )


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else "-"
