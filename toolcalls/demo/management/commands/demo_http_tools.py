"""``manage.py demo_http_tools --port P``: the demo's refund tools as HTTP tools."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from toolcalls.demo.tool_servers import http_serve


class Command(BaseCommand):
    help = (
        "Serve the demo shop's refund tools over HTTP at http://127.0.0.1:PORT "
        "(POST /tools/<name>, GET /reconcile/<name>), backed by the demo database; requests "
        "must be signed with CALLGATE_DEMO_TOOLS_SECRET."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8766)

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"HTTP tools on http://127.0.0.1:{options['port']}")
        self.stdout.flush()
        http_serve(port=options["port"])
