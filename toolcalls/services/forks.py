"""Fork an operation from one of its turns: re-run a real history, with the same or another
model, without repeating what it already did.

The fork is a new operation (``forked_from``, ``from_turn``) that starts with the conversation
the original's turn carried and numbers its turns on from there, so its first model request is
that turn's again. Everything else is the original's: tenant, requester, subject, tools,
instructions, settings, budgets, transport and script. Nothing is copied as done: every call the
fork's model proposes goes through the whole chain again, so a call that needs approval asks a
human again, and an effect the original already settled is answered from its idempotency
record (the call ends SUPPRESSED, naming the call that settled it) and never runs twice.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from toolcalls.actors import Actor
from toolcalls.models import Operation
from toolcalls.services.operations import Fork, OperationError, operation_start


def operation_fork(
    *, operation_pk: int, from_turn: int, actor: Actor, model: str | None = None
) -> Operation:
    """Start a fork of operation ``operation_pk`` from its turn ``from_turn`` (a turn index, as
    ``ModelTurn.index``), with ``model`` instead of the original's when given; returns the new
    PENDING operation. Raises ``Operation.DoesNotExist`` and :class:`OperationError`:
    ``unknown_turn``, ``bodies_pruned``, or any code of ``operation_start`` (a tool the
    original offered that its tenant no longer has, settings the model no longer takes, a live
    provider's missing key).
    """
    original = Operation.objects.select_related("tenant", "requested_by", "replay_script").get(
        pk=operation_pk
    )
    conversation = _conversation_at(original, from_turn)
    return operation_start(
        tenant=original.tenant,
        requested_by=original.requested_by,
        subject_ref=original.subject_ref,
        family=original.family,
        model=model or original.model,
        input_text=original.input_text,
        tool_names=original.tool_names,
        replay_script=original.replay_script,
        transport=original.transport,
        stream=original.stream,
        budgets=original.budgets,
        instructions=original.instructions,
        messages=original.messages,
        settings=original.settings,
        metadata=original.metadata,
        actor=actor,
        fork=Fork(operation=original, turn=from_turn, conversation=conversation),
    )


def _conversation_at(operation: Operation, turn: int) -> list[Any]:
    """The conversation turn ``turn`` of ``operation`` sent: the items each turn up to it sent
    first (``ModelTurn.request_items``). Raises :class:`OperationError` (``unknown_turn``;
    ``bodies_pruned`` when retention already removed them)."""
    if not operation.turns.filter(index=turn).exists():
        raise OperationError(
            "unknown_turn",
            f"{operation.public_id} has no turn {turn}",
            details={"turns": operation.turn_count},
        )
    if operation.bodies_pruned_at is not None:
        raise OperationError(
            "bodies_pruned", f"{operation.public_id}'s conversation was removed by retention"
        )
    sent = operation.turns.filter(index__lte=turn).order_by("index")
    return list(chain.from_iterable(sent.values_list("request_items", flat=True)))
