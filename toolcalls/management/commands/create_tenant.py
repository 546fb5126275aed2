"""``manage.py create_tenant --slug SLUG --name NAME``: create a tenant, or find it unchanged."""

from typing import Any

from django.core.management.base import CommandParser

from toolcalls.actors import COMMAND_LINE
from toolcalls.management.base import CallgateCommand
from toolcalls.services.tenants import SLUG_MAX, tenant_create


class Command(CallgateCommand):
    help = (
        "Create a tenant (a customer organisation; its members see only its data). Safe to run "
        "again: a tenant with that slug and that name is reported as 'exists' and left as it "
        "is; one with that slug and another name is refused (exit status 1). Its tool "
        "catalogue starts empty; add_tenant_member gives it members, create_api_key keys."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--slug",
            required=True,
            help=f"lowercase letters, digits, - and _, at most {SLUG_MAX} characters: the "
            "tenant's name for the other commands and for tools",
        )
        parser.add_argument("--name", required=True, help="the organisation's name, for people")

    def handle(self, *args: Any, **options: Any) -> None:
        result = tenant_create(slug=options["slug"], name=options["name"], actor=COMMAND_LINE)
        tenant = result.tenant
        state = "created" if result.created else "exists"
        inactive = "" if tenant.is_active else " (inactive: it may not use tools)"
        self.stdout.write(f"{state}: tenant {tenant.slug} ({tenant.name}){inactive}")
