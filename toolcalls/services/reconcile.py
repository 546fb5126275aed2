"""Unknown outcomes: ask the downstream system, retry safely, or let a human decide
(DESIGN.md §6; seeds 003 "Retry safety": a timeout says the reply was lost, not that the work
was not done).
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from toolcalls import registry
from toolcalls.envelopes import ErrorCode, error, ok
from toolcalls.models import ToolCall
from toolcalls.registry import Reconciliation
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.escalations import EscalationError, operation_escalate
from toolcalls.services.idempotency import key_settle
from toolcalls.services.locking import call_lock
from toolcalls.services.results import call_finish, call_set_settle, success_envelope, tool_context
from toolcalls.services.transitions import call_transition
from toolcalls.states import CallState, OperationState

ACTOR = "reconciler"


def call_reconcile(*, call_pk: int) -> None:
    """Ask the tool's ``reconcile`` whether the lost effect happened (outside any transaction),
    then: applied → SUCCEEDED with the recovered result; not applied → run again under the same
    idempotency key (bounded by ``CALLGATE_MAX_CALL_ATTEMPTS``); cannot tell → ESCALATED."""
    call = ToolCall.objects.select_related("operation__tenant").get(pk=call_pk)
    if call.state != CallState.UNKNOWN_OUTCOME:
        return
    spec = registry.get(call.tool_name)
    detail = ""
    try:
        answer = (
            spec.reconcile(tool_context(call.operation, call), call.idempotency_key)
            if spec and spec.reconcile
            else Reconciliation(applied=None)
        )
    except Exception as exc:  # a failing reconciler is an inconclusive one
        answer, detail = Reconciliation(applied=None), f"{type(exc).__name__}: {exc}"
    with transaction.atomic(durable=True):
        operation, call = call_lock(call_pk)
        if call.state != CallState.UNKNOWN_OUTCOME or spec is None:
            return
        if answer.applied:
            state, result, audit = success_envelope(spec, answer.data)
            call_finish(
                operation=operation,
                call=call,
                to_state=state,
                model_result=result,
                actor=ACTOR,
                audit=audit,
                details={"reconciled": "applied"},
            )
            key_settle(operation=operation, call=call, applied=True)
            call_set_settle(operation=operation, turn_id=call.turn_id, actor=ACTOR, resume=True)
        elif answer.applied is False and call.attempt < settings.CALLGATE_MAX_CALL_ATTEMPTS:
            call.queued_at = timezone.now()
            call_transition(
                operation=operation,
                call=call,
                to_state=CallState.PROPOSED,
                actor=ACTOR,
                details={"reconciled": "not applied", "retry": True},
                update_fields=["queued_at"],
            )
            enqueue_execute(call_pk=call.pk)
        elif operation.state != OperationState.ESCALATED:
            why = "attempts spent" if answer.applied is False else detail or "cannot tell"
            operation_escalate(
                operation=operation,
                reason=f"UNKNOWN_OUTCOME: {call.tool_name} ({call.call_id}): {why}",
                actor=ACTOR,
                call=call.public_id,
            )


#: What a human may say about a lost outcome → (call state, envelope for the model).
RESOLUTIONS = {
    "applied": CallState.SUCCEEDED,
    "not_applied": CallState.FAILED,
    "unknown": CallState.FAILED,
}


def call_resolve(*, call_pk: int, actor: str, resolution: str, note: str = "") -> ToolCall:
    """A human settles an unknown outcome: ``applied`` (it happened; the intent's answer),
    ``not_applied`` (it did not; the key is released so it may be tried again) or ``unknown``
    (the model is told nobody knows; the key stays held). The call set then goes on. Raises
    :class:`EscalationError` (``bad_resolution``, ``not_unknown``)."""
    if resolution not in RESOLUTIONS:
        raise EscalationError("bad_resolution", f"resolution must be one of {list(RESOLUTIONS)}")
    with transaction.atomic(durable=True):
        operation, call = call_lock(call_pk)
        if call.state != CallState.UNKNOWN_OUTCOME:
            raise EscalationError("not_unknown", f"the call is {call.state}, not UNKNOWN_OUTCOME")
        if resolution == "applied":
            result = ok({"outcome": "applied", "confirmed_by": "operator", "note": note})
        elif resolution == "not_applied":
            result = error(ErrorCode.NOT_APPLIED, "It did not take effect; it may be tried again.")
        else:
            message = "Whether this took effect is unknown; do not assume it did or did not."
            result = error(ErrorCode.UNKNOWN_OUTCOME, message)
        call_finish(
            operation=operation,
            call=call,
            to_state=RESOLUTIONS[resolution],
            model_result=result,
            actor=actor,
            details={"resolution": resolution, "note": note},
        )
        applied = {"applied": True, "not_applied": False}.get(resolution)
        key_settle(operation=operation, call=call, applied=applied)
        call_set_settle(operation=operation, turn_id=call.turn_id, actor=actor, resume=True)
    return call
