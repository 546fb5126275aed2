"""``manage.py demo_mcp_server --port P``: the demo's refund tools as an MCP server."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from toolcalls.demo.tool_servers import mcp_serve
from toolcalls.management.base import port_number


class Command(BaseCommand):
    help = (
        "Serve the demo shop's refund tools over MCP (streamable HTTP) at "
        "http://127.0.0.1:PORT/mcp, backed by the demo database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=port_number, default=8765)

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"MCP server on http://127.0.0.1:{options['port']}/mcp")
        self.stdout.flush()
        mcp_serve(port=options["port"])
