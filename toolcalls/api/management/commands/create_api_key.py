"""``manage.py create_api_key --tenant SLUG --name NAME --scopes a,b``: prints the key once."""

from typing import Any

from django.core.management.base import CommandParser

from toolcalls.api.auth import api_key_create
from toolcalls.api.models import SCOPES
from toolcalls.management.base import CallgateCommand


class Command(CallgateCommand):
    help = (
        "Create an API key for a tenant's backend service. The key is printed once and only its "
        f"SHA-256 is stored. Scopes: {', '.join(SCOPES)}."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--name", required=True, help="which service holds the key")
        parser.add_argument(
            "--scopes",
            default="operations:read,operations:write",
            help="comma-separated (default: %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = self.tenant(options["tenant"])
        scopes = [s.strip() for s in options["scopes"].split(",") if s.strip()]
        key, secret = api_key_create(tenant=tenant, name=options["name"], scopes=scopes)
        self.stdout.write(f"API key for {tenant.slug} ({key.name}; {', '.join(key.scopes)}):")
        self.stdout.write(secret)
        self.stdout.write("It is shown only now: store it in the service's secrets.")
