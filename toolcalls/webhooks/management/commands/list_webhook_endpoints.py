"""``manage.py list_webhook_endpoints [--tenant SLUG]``: one line per endpoint."""

from typing import Any

from django.core.management.base import CommandParser

from toolcalls.management.base import CallgateCommand
from toolcalls.webhooks.models import WebhookEndpoint


class Command(CallgateCommand):
    help = "List webhook endpoints: ID, tenant, active or not, event types, URL (no secrets)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="only this tenant's (slug)")

    def handle(self, *args: Any, **options: Any) -> None:
        rows = WebhookEndpoint.objects.select_related("tenant").order_by("tenant__slug", "pk")
        if options["tenant"]:
            rows = rows.filter(tenant=self.tenant(options["tenant"]))
        for endpoint in rows:
            state = "active" if endpoint.is_active else "inactive"
            events = ",".join(endpoint.events) or "all"
            self.stdout.write(
                f"{endpoint.pk}\t{endpoint.tenant.slug}\t{state}\t{events}\t{endpoint.url}"
            )
