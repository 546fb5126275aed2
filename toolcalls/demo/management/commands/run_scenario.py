"""``manage.py run_scenario FILE [--approve | --deny] [--json]``: run any scenario file."""

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from toolcalls.demo.management.commands._scenario_command import ScenarioCommand
from toolcalls.states import OperationState


class Command(ScenarioCommand):
    help = (
        "Run a scenario file (docs/scenarios.md) against the demo tools on the current database, "
        "printing every transition. Without --approve/--deny it stops when the operation parks."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        self.add_decision_arguments(parser)
        parser.add_argument("--json", action="store_true", help="end with a JSON summary line")
        parser.add_argument(
            "--expect",
            choices=OperationState.values,
            help="exit non-zero unless the final state is this one",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.run(
            path=options["file"], options=options, expect=options["expect"], as_json=options["json"]
        )
