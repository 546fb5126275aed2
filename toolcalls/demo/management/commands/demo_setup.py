"""``manage.py demo_setup [--start]``: seed the demo and optionally park one refund for review."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.demo.runner import RunOptions, ScenarioTimeout, scenario_run
from toolcalls.demo.scenario import bundled_path
from toolcalls.demo.services import demo_seed
from toolcalls.management.base import CallgateCommand, demo_seed_allowed


class Command(CallgateCommand):
    help = "Create the demo tenant, users and orders; with --start, run one refund to its approval."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--start", action="store_true", help="start the refund scenario and park it"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        demo_seed_allowed("demo_setup")
        seed = demo_seed()
        self.stdout.write(f"Demo tenant: {seed.tenant.slug}. Users (dev passwords):")
        for username, password in seed.passwords.items():
            self.stdout.write(f"  {username:<10} {password}")
        if options["start"]:
            path = bundled_path(family="openai_responses", name="refund_approve")
            run_options = RunOptions(timeout_s=30)
            try:
                operation = scenario_run(path=path, options=run_options, out=lambda _line: None)
            except ScenarioTimeout as exc:
                raise CommandError(
                    f"{exc}. No worker ran it: with CELERY_BROKER_URL set, start a worker "
                    "(make worker); for the embedded demo, leave CELERY_BROKER_URL empty."
                ) from None
            approval = operation.approvals.filter(state="PENDING").first()
            self.stdout.write(
                f"Refund operation {operation.public_id} is {operation.state}"
                + (f"; approval {approval.public_id} waits for an operator." if approval else ".")
            )
