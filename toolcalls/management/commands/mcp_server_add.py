"""``manage.py mcp_server_add --tenant T --name N (--url URL | --command ARGV ...)
[--header K:V ...]``: register a tenant's MCP server."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.actors import Actor
from toolcalls.management.base import CallgateCommand
from toolcalls.models import Tenant
from toolcalls.remote.models import RemoteServer
from toolcalls.remote.services import ServerForm, remote_server_register


class Command(CallgateCommand):
    help = (
        "Register an MCP server for a tenant and list its tools for review. Nothing becomes "
        "callable until an administrator enables a tool (admin or API)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="the tenant's slug")
        parser.add_argument("--name", required=True, help="prefix of its tools' names")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--url", help="streamable HTTP endpoint, e.g. https://host/mcp")
        where.add_argument(
            "--command", nargs="+", help="stdio: the command and its arguments (where allowed)"
        )
        parser.add_argument(
            "--header", action="append", default=[], help="K:V sent with every request"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {options['tenant']!r}")
        headers = {}
        for header in options["header"]:
            name, sep, value = header.partition(":")
            if not sep or not name.strip():
                raise CommandError(f"--header takes K:V, not {header!r}")
            headers[name.strip()] = value.strip()
        form = ServerForm(
            name=options["name"],
            kind=RemoteServer.Kind.MCP,
            url=options["url"] or "",
            command=options["command"] or (),
            headers=headers,
        )
        server = remote_server_register(tenant=tenant, form=form, actor=Actor.system("command"))
        self.stdout.write(f"registered {server} ({server.url or ' '.join(server.command)})")
        for tool in server.tools.order_by("name"):
            state = f"cannot be enabled: {tool.problem}" if tool.problem else "awaits review"
            self.stdout.write(f"  {tool.name}: {state}")
