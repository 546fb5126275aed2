"""``manage.py fork_operation op_… --from-turn N [--model M | --agent A[@R]]``: re-run an
operation from a turn."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.actors import COMMAND_LINE
from toolcalls.management.base import CallgateCommand
from toolcalls.models import Operation
from toolcalls.services.agents import agent_revision_get
from toolcalls.services.forks import operation_fork


class Command(CallgateCommand):
    help = (
        "Start a new operation from turn N of an operation: its conversation up to that turn, "
        "the same tools, settings and budgets, optionally another model or agent revision. "
        "Effects the original "
        "already settled are answered from their idempotency records, never run again; "
        "approvals are asked again where policy requires. Prints the new operation's ID."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("operation", metavar="OPERATION", help="The operation (op_…).")
        parser.add_argument(
            "--from-turn", type=int, required=True, metavar="N", help="Turn index, from 0."
        )
        parser.add_argument("--model", metavar="M", help="Another model for the fork.")
        parser.add_argument(
            "--agent",
            metavar="A[@R]",
            help="Run the fork with this agent profile revision of the operation's tenant "
            "(name: its latest revision).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        public_id = options["operation"]
        try:
            operation_pk = Operation.objects.values_list("pk", flat=True).get(public_id=public_id)
        except Operation.DoesNotExist:
            raise CommandError(f"no operation {public_id}") from None
        agent = None
        if options["agent"]:
            tenant = Operation.objects.get(pk=operation_pk).tenant
            agent = agent_revision_get(tenant=tenant, reference=options["agent"])
        fork = operation_fork(
            operation_pk=operation_pk,
            from_turn=options["from_turn"],
            actor=COMMAND_LINE,
            model=options["model"],
            agent=agent,
        )
        self.stdout.write(fork.public_id)
