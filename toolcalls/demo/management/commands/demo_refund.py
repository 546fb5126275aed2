"""``manage.py demo_refund [--provider F] [--tools local|mcp|http [--tools-url URL]]
[--approve | --deny]``: the refund demo, headless."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from providers.families import ADAPTERS
from toolcalls.demo.management.commands._scenario_command import ScenarioCommand
from toolcalls.demo.remote import DEFAULT_URLS, demo_remote_register
from toolcalls.demo.scenario import bundled_path
from toolcalls.demo.services import demo_seed
from toolcalls.states import OperationState


class Command(ScenarioCommand):
    help = (
        "Run the bundled refund scenario: look up, draft, approval, submit, explanation. "
        "Exits 0 when the operation ends as expected (COMPLETED with --approve or --deny, "
        "WAITING_APPROVAL without)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", default="openai_responses", choices=sorted(ADAPTERS))
        parser.add_argument(
            "--tools",
            default="local",
            choices=["local", "mcp", "http"],
            help="where the refund tools run: in Callgate (local), or out of process on the "
            "demo's MCP server (demo_mcp_server) or HTTP tool server (demo_http_tools)",
        )
        parser.add_argument(
            "--tools-url",
            help=f"the demo tool server (default {DEFAULT_URLS['mcp']} for mcp, "
            f"{DEFAULT_URLS['http']} for http); registered for tenant acme when it is not yet, "
            "refused when acme has it registered at another URL",
        )
        self.add_decision_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        name = "refund_deny" if options["deny"] else "refund_approve"
        path = bundled_path(family=options["provider"], name=name)
        if not path.exists():
            raise CommandError(f"no bundled refund scenario for {options['provider']}")
        if options["tools"] == "local" and options["tools_url"] is not None:
            raise CommandError("--tools-url goes with --tools mcp or http: local tools run here")
        if options["tools"] != "local":
            demo_seed()
            demo_remote_register(kind=options["tools"], url=options["tools_url"])
        decided = options["approve"] or options["deny"]
        expect = OperationState.COMPLETED if decided else OperationState.WAITING_APPROVAL
        self.run(path=path, options=options, expect=expect, as_json=False)
