"""``manage.py fake_provider --port P [--host H] [DIR ...]``: every API family's endpoint on one
local port, answering from scenario files, for the live transport without a provider account."""

import threading
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from providers.fake_server import ReplayServer
from toolcalls.demo.scenario import BUNDLED_DIR, scenario_read
from toolcalls.management.base import CallgateCommand

#: The providers whose SDKs the live transport uses (``CALLGATE_<PROVIDER>_BASE_URL``).
PROVIDERS = ("openai", "anthropic", "google")


class Command(CallgateCommand):
    help = (
        "Serve the five API families' endpoints (OpenAI Responses and Chat Completions, "
        "Anthropic Messages, Gemini generateContent and Interactions) from scenario files "
        "(docs/scenarios.md): each file is a model named after it, in its family, and answers "
        "one operation at a time, from its first reply again once it has served its last. Point "
        "CALLGATE_<PROVIDER>_BASE_URL at it (printed at start) and use the live transport."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, required=True)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "dirs",
            nargs="*",
            type=Path,
            help=f"directories of scenario files, searched recursively (default: {BUNDLED_DIR})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        server = ReplayServer(host=options["host"], port_wanted=options["port"], rewind=True)
        for path in sorted(p for d in options["dirs"] or [BUNDLED_DIR] for p in d.rglob("*.json")):
            scenario = scenario_read(path)
            server.script(model=path.stem, family=scenario["family"], replies=scenario["replies"])
            self.stdout.write(f"model {path.stem!r} of {scenario['family']}: {path}")
        server.start()
        for provider in PROVIDERS:
            self.stdout.write(f"CALLGATE_{provider.upper()}_BASE_URL={server.base_url(provider)}")
        self.stdout.write("Serving; Ctrl-C to stop.")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
