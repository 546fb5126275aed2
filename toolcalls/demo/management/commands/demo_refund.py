"""``manage.py demo_refund [--provider F] [--approve | --deny]``: the refund demo, headless."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from providers.families import ADAPTERS
from toolcalls.demo.management.commands._scenario_command import ScenarioCommand
from toolcalls.demo.scenario import bundled_path
from toolcalls.states import OperationState


class Command(ScenarioCommand):
    help = (
        "Run the bundled refund scenario: look up, draft, approval, submit, explanation. "
        "Exits 0 when the operation ends as expected (COMPLETED with --approve or --deny, "
        "WAITING_APPROVAL without)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--provider", default="openai_responses", choices=sorted(ADAPTERS))
        self.add_decision_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        name = "refund_deny" if options["deny"] else "refund_approve"
        path = bundled_path(family=options["provider"], name=name)
        if not path.exists():
            raise CommandError(f"no bundled refund scenario for {options['provider']}")
        decided = options["approve"] or options["deny"]
        expect = OperationState.COMPLETED if decided else OperationState.WAITING_APPROVAL
        self.run(path=path, options=options, expect=expect, as_json=False)
