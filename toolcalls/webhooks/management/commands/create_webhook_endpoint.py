"""``manage.py create_webhook_endpoint --tenant SLUG --url URL [--events a,b]``: prints the
endpoint's signing secret."""

from typing import Any

from django.core.management.base import CommandParser

from toolcalls.management.base import CallgateCommand
from toolcalls.webhooks.endpoints import webhook_endpoint_create
from toolcalls.webhooks.outbox import EVENT_TYPES


class Command(CallgateCommand):
    help = (
        "Register a webhook endpoint of a tenant and print its signing secret (README, Webhooks). "
        f"Event types: {', '.join(sorted(EVENT_TYPES.values()))} (none given: every one)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--url", required=True, help="http(s) URL the events are POSTed to")
        parser.add_argument("--events", default="", help="comma-separated event types")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = self.tenant(options["tenant"])
        events = [e.strip() for e in options["events"].split(",") if e.strip()]
        endpoint = webhook_endpoint_create(tenant=tenant, url=options["url"], events=events)
        self.stdout.write(f"Webhook endpoint {endpoint.pk} of {tenant.slug}: {endpoint.url}")
        self.stdout.write(f"events: {', '.join(endpoint.events) or 'all'}")
        self.stdout.write(f"signing secret: {endpoint.secret}")
