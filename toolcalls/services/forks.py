"""Fork an operation from one of its turns: re-run a real history, with the same or another
model or agent revision, without repeating what it already did.

The fork is a new operation (``forked_from``, ``from_turn``) that starts with the conversation
the original's turn carried and numbers its turns on from there, so its first model request is
that turn's again. Everything else is the original's: tenant, requester, subject, tools,
instructions, settings, budgets, agent revision, transport and script (or, given an agent
revision, that revision's family, model, instructions, tools, settings and budgets). Nothing is
copied as done: every call the fork's model proposes goes through the whole chain again, so a
call that needs approval asks a human again, and an effect the original already settled is
answered from its idempotency record (the call ends SUPPRESSED, naming the call that settled
it) and never runs twice.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from django.contrib.auth.models import User

from toolcalls.actors import Actor
from toolcalls.models import AgentRevision, Operation
from toolcalls.services.operations import Fork, OperationError, operation_start


def operation_fork(
    *,
    operation_pk: int,
    from_turn: int,
    actor: Actor,
    author: User | None = None,
    model: str | None = None,
    agent: AgentRevision | None = None,
) -> Operation:
    """Start a fork of operation ``operation_pk`` from its turn ``from_turn`` (a turn index, as
    ``ModelTurn.index``) for ``author`` (the user forking it, or the API key's service user;
    ``actor`` in the audit trail; ``None`` from the command line), who may not decide its
    approvals, as its requester may not; returns the new PENDING operation. It runs as the
    original did (:func:`_configuration`): with ``model`` instead of the original's model when
    given, or with agent revision ``agent`` instead of the original's configuration. Raises
    ``Operation.DoesNotExist`` and :class:`OperationError`: ``unknown_turn``,
    ``bodies_pruned``, ``agent_conflict`` (``model`` with an agent revision, or an agent
    revision of another API family than the original's conversation), or any code of
    ``operation_start`` (a tool the original offered that its tenant no longer has, settings
    the model no longer takes, a live provider's missing key).
    """
    original = Operation.objects.select_related(
        "tenant", "requested_by", "replay_script", "agent_revision"
    ).get(pk=operation_pk)
    conversation = _conversation_at(original, from_turn)
    return operation_start(
        tenant=original.tenant,
        requested_by=original.requested_by,
        subject_ref=original.subject_ref,
        input_text=original.input_text,
        replay_script=original.replay_script,
        transport=original.transport,
        stream=original.stream,
        messages=original.messages,
        metadata=original.metadata,
        actor=actor,
        fork=Fork(operation=original, turn=from_turn, conversation=conversation, author=author),
        **_configuration(original, model, agent),
    )


def _configuration(
    original: Operation, model: str | None, agent: AgentRevision | None
) -> dict[str, Any]:
    """What the fork runs with: the original's own family, model (or ``model``), tools,
    instructions, settings and budgets; or its agent revision, or ``agent``, which then sets
    them (the original's settings and budgets go on only under the original's revision)."""
    revision = agent or original.agent_revision
    if revision is None:
        return {
            "family": original.family,
            "model": model or original.model,
            "tool_names": original.tool_names,
            "instructions": original.instructions,
            "settings": original.settings,
            "budgets": original.budgets,
        }
    if model:
        message = f"the agent profile {revision.label} sets the model: leave the model out"
        raise OperationError("agent_conflict", message, details={"fields": {"model": [message]}})
    if revision.family != original.family:
        message = (
            f"the agent profile {revision.label} runs {revision.family}; the fork goes on with "
            f"{original.family}'s conversation, which another API family cannot read"
        )
        raise OperationError("agent_conflict", message, details={"fields": {"agent": [message]}})
    kept = {}
    if revision.pk == original.agent_revision_id:
        kept = {"settings": original.settings, "budgets": original.budgets}
    return {"family": "", "model": "", "agent": revision, **kept}


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
