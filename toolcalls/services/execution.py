"""Execute one call at most once per business intent: claim → run → record (docs/design.md §6).

The claim and the record are steps under the operation and call row locks (the claim usually
rides in the step before it: docs/engine.md); the handler runs between them, on a handler
thread, outside any transaction, with its timeout. A lease token written at claim time fences
the record: a worker whose lease was taken over cannot write its result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.utils import timezone

from toolcalls import catalogue, faultpoints, telemetry
from toolcalls.actors import WORKER
from toolcalls.envelopes import ErrorCode, error
from toolcalls.models import Operation, ToolCall
from toolcalls.registry import ToolContext, ToolError, ToolSpec
from toolcalls.services.connections import record_retrying
from toolcalls.services.enqueue import Claimed, enqueue_execute, enqueue_reconcile
from toolcalls.services.escalations import operation_escalate_unknown
from toolcalls.services.handler_threads import handler_run
from toolcalls.services.idempotency import key_reserve, key_settle
from toolcalls.services.results import (
    call_finish,
    call_result,
    call_set_advance,
    call_set_settle,
    success_envelope,
    tool_context,
)
from toolcalls.services.transitions import call_transition
from toolcalls.services.unit import Step, call_step, lease_clear, lease_held, lease_take
from toolcalls.states import OPERATION_TERMINAL, AuditKind, CallState, OperationState
from toolcalls.storage import storable

#: Time a call's lease leaves past its handler's wait (ms) for recording what the run did.
RECORD_MARGIN_MS = 1_000

#: Run inside the claim transaction with the rows locked; returns (error code, message) to
#: reject the call instead of running it, or ``None``.
Precheck = Callable[[Operation, ToolCall], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Claim:
    call_pk: int
    lease_token: str
    spec: ToolSpec
    context: ToolContext
    arguments: Mapping[str, Any]
    call_id: str
    attempt: int
    trace_context: Mapping[str, str]
    #: The only call of its set: its record makes the results ready, and likely claims the
    #: next model turn (``unit.call_step(model_input=...)``).
    alone: bool


@dataclass
class HandlerOutcome:
    """What happened when the handler ran: ``kind`` is ok, tool_error, crash or timeout."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)
    tool_error: ToolError | None = None
    detail: str = ""


def call_execute(*, call_pk: int, precheck: Precheck | None = None) -> None:
    """Run call ``call_pk`` if it is still runnable; a no-op for a call already claimed or done.

    ``precheck`` adds checks under the claim's locks (resume uses it to revalidate an approval:
    the step then reads the requester with the operation, for the validation chain).
    """
    with call_step(call_pk, requester=precheck is not None) as step:
        claim = call_claim(step, step.call, precheck=precheck)
    if claim is not None:
        call_run(claim)


def call_run(claim: Claim) -> None:
    """Run a claimed call's handler, outside any transaction, and record what it did (under
    the claim's lease)."""
    faultpoints.reach("call.after_claim")
    outcome = _run(claim)
    faultpoints.reach("call.before_record")
    # A permanent error, or a database out of reach for longer, leaves the call EXECUTING under
    # its lease: recovery settles it as a lost run once the lease runs out.
    record_retrying(
        partial(_record, claim, outcome), what=f"{claim.context.operation_id} {claim.spec.name}"
    )


def call_claim_woken(step: Step, call_pk: int) -> Claimed | None:
    """The claimer of ``toolcalls.execute_call`` (``enqueue.WakeUp.claim``): claim call
    ``call_pk`` in ``step`` when the step holds it (the turn that proposed it, or the call
    step that made room for it). ``None`` when the step does not hold it."""
    call = step.held(call_pk)
    if call is None:
        return None
    claim = call_claim(step, call)
    return Claimed(partial(call_run, claim) if claim is not None else None)


def call_claim(step: Step, call: ToolCall, *, precheck: Precheck | None = None) -> Claim | None:
    """Claim ``call`` (held by ``step``, its operation locked) for this worker: EXECUTING under a
    new lease, its idempotency key reserved. ``None`` when it is no longer runnable, or when it
    got its result (or was queued again) instead: rejected by ``precheck`` or a catalogue that
    no longer has its tool, answered from its key's record, or waiting for the key's holder."""
    operation = step.operation
    if operation.state in OPERATION_TERMINAL:
        if call.state == CallState.PROPOSED and call.attempt:
            _retry_dropped(step, call)
        return None
    if call.state not in (CallState.PROPOSED, CallState.APPROVED):
        return None
    spec = catalogue.tool_spec(operation, call.tool_name)
    problem = precheck(operation, call) if precheck else None
    if problem or spec is None:
        # No spec: the tool resolved at dispatch, and the tenant's catalogue has changed
        # since (a remote tool disabled, or changed on its server).
        result = error(*(problem or _gone(call)))
        call_finish(step, call, to_state=CallState.REJECTED, model_result=result, actor=WORKER)
        return None
    arguments = call.arguments or {}
    if spec.idempotency_key is not None:
        call.idempotency_key = spec.idempotency_key(tool_context(operation, call), arguments)
        step.change(call, "idempotency_key")
        if not key_reserve(step, call, spec=spec, arguments=arguments):
            return None
    return _start(step, call, spec, arguments, revalidated=precheck is not None)


def _retry_dropped(step: Step, call: ToolCall) -> None:
    """A call queued to run again (a lost read, or a side effect its reconciler found not
    applied) whose operation ended before it ran: it does not run, and the key it holds, if
    any, is released (nothing took effect under it)."""
    result = error(ErrorCode.NOT_APPLIED, "It was not run again: its operation ended.")
    details = {"operation_state": step.operation.state}
    call_finish(
        step, call, to_state=CallState.REJECTED, model_result=result, actor=WORKER, details=details
    )
    key_settle(step, call, applied=False)


def _gone(call: ToolCall) -> tuple[str, str]:
    return ErrorCode.UNKNOWN_TOOL, f"The tool {call.tool_name!r} is no longer available."


def _start(
    step: Step, call: ToolCall, spec: ToolSpec, arguments: Mapping[str, Any], *, revalidated: bool
) -> Claim:
    """Move the claimed call to EXECUTING under a new lease. A ``revalidated`` call (resumed
    after approval) names in its audit details the policy revision it was checked against and
    the operation's agent revision: the one it started with, whatever revisions came since."""
    call.attempt += 1
    step.change(call, "attempt")
    # Never taken back while the handler may still be within its time: the run, then its record.
    token = lease_take(step, call, at_least_ms=_handler_wait_ms(spec) + RECORD_MARGIN_MS)
    details = {"idempotency_key": call.idempotency_key}
    if revalidated:
        details["policy_revision"] = spec.approval.revision
        if step.operation.agent_revision is not None:
            details["agent_revision"] = step.operation.agent_revision.label
    call_transition(step, call, to_state=CallState.EXECUTING, actor=WORKER, details=details)
    if step.operation.state != OperationState.EXECUTING:
        # A call starting cannot move an EXECUTING set: none of its calls waits for a
        # human (the operation would be WAITING_APPROVAL) and this one is not finished.
        call_set_settle(step, turn_id=call.turn_id, actor=WORKER)
    context = tool_context(step.operation, call)
    trace = step.operation.trace_context
    alone = len(step.call_set(call.turn_id)) == 1
    return Claim(
        call.pk, token, spec, context, arguments, call.public_id, call.attempt, trace, alone
    )


@telemetry.tool_run
def _run(claim: Claim) -> HandlerOutcome:
    """Run the handler in a handler thread so its timeout (``timeout_ms``, and the spec's
    ``timeout_grace_ms`` for a handler that ends itself) can be enforced
    (:mod:`toolcalls.services.handler_threads`).

    A handler that outlives its timeout keeps running in the background; the call is recorded
    as timed out and, for side-effecting tools, as an unknown outcome.
    """

    def target() -> HandlerOutcome:
        try:
            return HandlerOutcome("ok", data=claim.spec.handler(claim.context, claim.arguments))
        except ToolError as exc:
            return HandlerOutcome("tool_error", tool_error=exc)
        except Exception as exc:  # a handler bug must not take the loop down with it
            return HandlerOutcome("crash", detail=f"{type(exc).__name__}: {exc}")

    waited_ms = _handler_wait_ms(claim.spec)
    box = handler_run(target, timeout_s=waited_ms / 1000)
    if not box:
        return HandlerOutcome("timeout", detail=f"no answer within {waited_ms} ms")
    return box[0]


def _handler_wait_ms(spec: ToolSpec) -> int:
    """How long the engine waits for a handler, in ms: its timeout and its grace."""
    return spec.timeout_ms + spec.timeout_grace_ms


def _record(claim: Claim, outcome: HandlerOutcome) -> None:
    with call_step(claim.call_pk, model_input=claim.alone) as step:
        call = step.call
        if call.state != CallState.EXECUTING or not lease_held(call, claim.lease_token):
            step.audit(
                kind=AuditKind.CALL_STALE_RESULT_REFUSED,
                actor=WORKER,
                call=call,
                details={"outcome": outcome.kind, "state": call.state},
            )
            return
        if outcome.kind in ("crash", "timeout"):
            settle_lost_call(step, spec=claim.spec, kind=outcome.kind, detail=outcome.detail)
            return
        state, result, audit = _envelope(claim.spec, outcome)
        if outcome.kind == "ok" and state != CallState.SUCCEEDED and claim.spec.has_side_effects:
            # It ran, and what it answered cannot be recorded: as good as a lost answer.
            detail = str(audit.get("detail", result["error"]["message"]))
            settle_lost_call(step, spec=claim.spec, kind="unreadable", detail=detail)
            return
        lease_clear(step, call)
        call_finish(step, call, to_state=state, model_result=result, actor=WORKER, audit=audit)
        if claim.spec.has_side_effects:
            key_settle(step, call, applied=state == CallState.SUCCEEDED)
        step.flush()
        faultpoints.reach("call.in_record")  # inside the transaction, before it commits


def settle_lost_call(step: Step, *, spec: ToolSpec | None, kind: str, detail: str) -> None:
    """A run of the step's call whose answer was lost (``kind``: crash, timeout, unreadable: a
    side effect's answer that cannot be recorded, or a worker that stopped answering and lost
    its lease). A side effect may or may not have happened,
    never "failed": its outcome is unknown and the reconciler asks, else a human decides. A
    read-only call runs again while ``CALLGATE_MAX_CALL_ATTEMPTS`` allows and its operation has
    not ended, else fails. The call's lease is cleared, so the lost run can no longer record
    anything."""
    call = step.call
    lease_clear(step, call)
    details: dict[str, Any] = {"outcome": kind, "detail": detail}
    ended = step.operation.state in OPERATION_TERMINAL
    if spec is None or spec.has_side_effects:
        _outcome_unknown(step, call, spec, details)
    elif call.attempt < settings.CALLGATE_MAX_CALL_ATTEMPTS and not ended:
        delay = settings.CALLGATE_RETRY_BASE_MS * 2 ** (call.attempt - 1) / 1000
        call.queued_at = timezone.now() + timedelta(seconds=delay)
        step.change(call, "queued_at")
        retry = {**details, "retry": True}
        call_transition(step, call, to_state=CallState.PROPOSED, actor=WORKER, details=retry)
        enqueue_execute(step, call_pk=call.pk, countdown_s=delay)
    else:
        code = ErrorCode.TIMEOUT if kind == "timeout" else ErrorCode.TOOL_FAILED
        message = f"The tool did not complete after {call.attempt} attempts."
        if ended:
            message = "The tool did not complete, and its operation ended: not tried again."
        result = error(code, message)
        call_result(
            step,
            call,
            to_state=CallState.FAILED,
            model_result=result,
            actor=WORKER,
            audit={"detail": detail},
        )
    call_set_advance(step, turn_id=call.turn_id, actor=WORKER)


#: How a lost run ended, for the escalation's reason (``settle_lost_call``'s kinds).
_LOST = {
    "crash": "ended without an answer",
    "unreadable": "answered with a result that cannot be recorded",
    "timeout": "timed out",
    "lease_expired": "lost its worker",
}


def _outcome_unknown(
    step: Step, call: ToolCall, spec: ToolSpec | None, details: Mapping[str, Any]
) -> None:
    call_transition(step, call, to_state=CallState.UNKNOWN_OUTCOME, actor=WORKER, details=details)
    if spec is not None and spec.reconcile is not None:
        enqueue_reconcile(step, call_pk=call.pk)
    else:
        operation_escalate_unknown(
            step,
            reason=f"UNKNOWN_OUTCOME: {call.tool_name} ({call.public_id}) "
            f"{_LOST.get(details['outcome'], details['outcome'])} ({details['detail']}), "
            "and no reconciler can tell whether it took effect",
            actor=WORKER,
            call=call.public_id,
        )


def _envelope(
    spec: ToolSpec, outcome: HandlerOutcome
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if outcome.kind == "ok":
        return success_envelope(spec, outcome.data)
    assert outcome.tool_error is not None, "lost runs are settled by settle_lost_call"
    exc = outcome.tool_error  # its text may come from a remote tool: stored as it can be
    return CallState.FAILED, error(storable(exc.code), storable(exc.message)), storable(exc.audit)
