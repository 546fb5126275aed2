"""``manage.py demo_mcp_server --port P``: the demo's refund tools as an MCP server."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolcalls.demo.tool_servers import mcp_listen, mcp_serve
from toolcalls.management.base import port_number


class Command(BaseCommand):
    help = (
        "Serve the demo shop's refund tools over MCP (streamable HTTP) at "
        "http://127.0.0.1:PORT/mcp, backed by the demo database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=port_number, default=8765)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            listening = mcp_listen(port=options["port"])
        except OSError as exc:  # the port is taken
            message = f"cannot listen on 127.0.0.1:{options['port']}: {exc.strerror or exc}"
            raise CommandError(message) from None
        self.stdout.write(f"MCP server on http://127.0.0.1:{options['port']}/mcp")
        self.stdout.flush()
        with listening:
            mcp_serve(listening)
