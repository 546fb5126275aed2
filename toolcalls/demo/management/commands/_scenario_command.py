"""What ``run_scenario`` and ``demo_refund`` share: options, running, the final lines."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.demo.runner import RunOptions, printable, scenario_run, summary
from toolcalls.management.base import CallgateCommand, demo_seed_allowed


class ScenarioCommand(CallgateCommand):
    def add_decision_arguments(self, parser: CommandParser) -> None:
        choice = parser.add_mutually_exclusive_group()
        choice.add_argument("--approve", action="store_true", help="act as the operator: approve")
        choice.add_argument("--deny", action="store_true", help="act as the operator: deny")
        parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")

    def execute(self, *args: Any, **options: Any) -> Any:
        demo_seed_allowed(self.__module__.rpartition(".")[2])
        return super().execute(*args, **options)

    def run(
        self, *, path: Path, options: dict[str, Any], expect: str | None, as_json: bool
    ) -> None:
        # This command prints every transition itself; the log lines would repeat them.
        for name in ("callgate.transitions", "celery.app.trace"):
            logging.getLogger(name).setLevel(logging.WARNING)
        decision = "approve" if options["approve"] else "deny" if options["deny"] else None
        run_options = RunOptions(
            decision=decision, timeout_s=options["timeout"], tools=options.get("tools", "local")
        )
        operation = scenario_run(path=path, options=run_options, out=self.stdout.write)
        if operation.final_text:
            self.stdout.write(f"model: {printable(operation.final_text)}")
        reason = f" ({printable(operation.terminal_reason)})" if operation.terminal_reason else ""
        self.stdout.write(f"final state: {operation.state}{reason} operation={operation.public_id}")
        if as_json:
            self.stdout.write(json.dumps(summary(operation), separators=(",", ":")))
        if expect and operation.state != expect:
            raise CommandError(f"expected {expect}, got {operation.state}")
