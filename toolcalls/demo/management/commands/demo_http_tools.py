"""``manage.py demo_http_tools --port P``: the demo's refund tools as HTTP tools."""

import contextlib
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolcalls.demo.tool_servers import http_server
from toolcalls.management.base import port_number


class Command(BaseCommand):
    help = (
        "Serve the demo shop's refund tools over HTTP at http://127.0.0.1:PORT "
        "(POST /tools/<name>, GET /reconcile/<name>), backed by the demo database; requests "
        "must be signed with CALLGATE_DEMO_TOOLS_SECRET."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=port_number, default=8766)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            httpd = http_server(port=options["port"])
        except OSError as exc:  # the port is taken
            message = f"cannot listen on 127.0.0.1:{options['port']}: {exc.strerror or exc}"
            raise CommandError(message) from None
        self.stdout.write(f"HTTP tools on http://127.0.0.1:{options['port']}")
        self.stdout.flush()
        # Ctrl-C ends it, without a traceback.
        with httpd, contextlib.suppress(KeyboardInterrupt):
            httpd.serve_forever()
