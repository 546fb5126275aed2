"""Unknown outcomes: ask the downstream system, retry safely, or let a human decide
(docs/design.md §6, retry safety: a timeout says the reply was lost, not that the work was not
done).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils import timezone

from toolcalls import catalogue
from toolcalls.actors import RECONCILER, Actor
from toolcalls.envelopes import ErrorCode, error, ok
from toolcalls.models import ToolCall
from toolcalls.registry import Reconciliation, ToolSpec
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.escalations import EscalationError, operation_escalate_unknown
from toolcalls.services.idempotency import key_settle
from toolcalls.services.results import call_finish, success_envelope, tool_context
from toolcalls.services.transitions import call_transition
from toolcalls.services.unit import Step, call_step
from toolcalls.states import OPERATION_TERMINAL, CallState


def call_reconcile(*, call_pk: int) -> None:
    """Ask the tool's ``reconcile`` whether the lost effect happened (outside any transaction),
    then: applied → SUCCEEDED with the recovered result; not applied → run again under the same
    idempotency key (bounded by ``CALLGATE_MAX_CALL_ATTEMPTS``); cannot tell → ESCALATED.

    For an operation that ended while the call ran (cancelled, stopped), nothing runs again:
    not applied → FAILED (``NOT_APPLIED``), its key released; cannot tell → the call stays
    UNKNOWN_OUTCOME, its key held, for a person to record (``call_resolve``)."""
    call = ToolCall.objects.select_related("operation__tenant").get(pk=call_pk)
    if call.state != CallState.UNKNOWN_OUTCOME:
        return
    spec = catalogue.tool_spec(call.operation, call.tool_name)
    answer, detail = _ask(spec, call)
    with call_step(call_pk) as step:
        call = step.call
        if call.state != CallState.UNKNOWN_OUTCOME or spec is None:
            return
        if answer.applied:
            state, result, audit = success_envelope(spec, answer.data)
            details = {"reconciled": "applied"}
            call_finish(
                step,
                call,
                to_state=state,
                model_result=result,
                actor=RECONCILER,
                audit=audit,
                details=details,
                resume=True,
            )
            key_settle(step, call, applied=True)
        elif answer.applied is False and step.operation.state in OPERATION_TERMINAL:
            _not_applied(step, call)
        elif answer.applied is False and call.attempt < settings.CALLGATE_MAX_CALL_ATTEMPTS:
            _retry(step, call)
        else:
            why = "attempts spent" if answer.applied is False else detail or "cannot tell"
            reason = f"UNKNOWN_OUTCOME: {call.tool_name} ({call.public_id}): {why}"
            operation_escalate_unknown(step, reason=reason, actor=RECONCILER, call=call.public_id)


def _ask(spec: ToolSpec | None, call: ToolCall) -> tuple[Reconciliation, str]:
    """The reconciler's answer, and what went wrong when it could not give one."""
    if spec is None or spec.reconcile is None:
        return Reconciliation(applied=None), ""
    try:
        return spec.reconcile(tool_context(call.operation, call), call.idempotency_key), ""
    except Exception as exc:  # a failing reconciler is an inconclusive one
        return Reconciliation(applied=None), f"{type(exc).__name__}: {exc}"


def _retry(step: Step, call: ToolCall) -> None:
    """Not applied: run it again under the same idempotency key."""
    call.queued_at = timezone.now()
    step.change(call, "queued_at")
    details = {"reconciled": "not applied", "retry": True}
    call_transition(step, call, to_state=CallState.PROPOSED, actor=RECONCILER, details=details)
    enqueue_execute(step, call_pk=call.pk)


def _not_applied(step: Step, call: ToolCall) -> None:
    """Not applied, and its operation ended: the call fails and its key is released."""
    result = error(ErrorCode.NOT_APPLIED, "It did not take effect; its operation ended.")
    details = {"reconciled": "not applied", "operation_state": step.operation.state}
    call_finish(
        step,
        call,
        to_state=CallState.FAILED,
        model_result=result,
        actor=RECONCILER,
        details=details,
    )
    key_settle(step, call, applied=False)


#: What a human may say about a lost outcome → (call state, envelope for the model).
RESOLUTIONS = {
    "applied": CallState.SUCCEEDED,
    "not_applied": CallState.FAILED,
    "unknown": CallState.FAILED,
}


def call_resolve(*, call_pk: int, actor: Actor, resolution: str, note: str = "") -> ToolCall:
    """A human settles an unknown outcome: ``applied`` (it happened; the intent's answer),
    ``not_applied`` (it did not; the key is released so it may be tried again) or ``unknown``
    (the model is told nobody knows; the key stays held). The call set then goes on (an
    operation ESCALATED for it resumes). An operation that ended meanwhile (stopped while it
    waited for this) stays as it ended: only the call and its key are settled, so the key of a
    lost effect is never held for ever once someone knows what happened. Raises
    :class:`EscalationError` (``bad_resolution``; ``not_unknown_outcome`` when the call's
    outcome is not unknown: it is still running, or it was settled); nothing is recorded
    then."""
    if resolution not in RESOLUTIONS:
        raise EscalationError("bad_resolution", f"resolution must be one of {list(RESOLUTIONS)}")
    with call_step(call_pk) as step:
        call = step.call
        if call.state != CallState.UNKNOWN_OUTCOME:
            message = (
                f"the call is {call.state}, not UNKNOWN_OUTCOME: there is no outcome to record"
            )
            raise EscalationError("not_unknown_outcome", message)
        call_finish(
            step,
            call,
            to_state=RESOLUTIONS[resolution],
            model_result=_resolution_result(resolution, note),
            actor=actor,
            details={"resolution": resolution, "note": note},
            resume=True,
        )
        applied = {"applied": True, "not_applied": False}.get(resolution)
        key_settle(step, call, applied=applied)
    return call


def _resolution_result(resolution: str, note: str) -> dict[str, Any]:
    if resolution == "applied":
        return ok({"outcome": "applied", "confirmed_by": "operator", "note": note})
    if resolution == "not_applied":
        return error(ErrorCode.NOT_APPLIED, "It did not take effect; it may be tried again.")
    message = "Whether this took effect is unknown; do not assume it did or did not."
    return error(ErrorCode.UNKNOWN_OUTCOME, message)
