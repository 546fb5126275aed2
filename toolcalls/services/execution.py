"""Execute one call at most once per business intent: claim → run → record (DESIGN.md §6).

The claim and the record are short transactions under the operation and call row locks; the
handler runs between them, outside any transaction, with its timeout. A lease token written at
claim time fences the record: a worker whose lease was taken over cannot write its result.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connections, transaction
from django.utils import timezone

from toolcalls import registry
from toolcalls.binding import digest
from toolcalls.envelopes import ErrorCode, error, ok
from toolcalls.models import IdempotencyRecord, Operation, ToolCall
from toolcalls.registry import ToolContext, ToolError, ToolSpec
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.results import call_finish, call_set_settle, tool_context
from toolcalls.services.transitions import call_transition
from toolcalls.states import OPERATION_TERMINAL, CallState

ACTOR = "worker"
#: Seconds before a call whose idempotency key is held by another call is looked at again.
IN_FLIGHT_RECHECK_S = 1.0

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


@dataclass
class HandlerOutcome:
    """What happened when the handler ran: ``kind`` is ok, tool_error, crash or timeout."""

    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)
    tool_error: ToolError | None = None
    detail: str = ""


def call_execute(*, call_pk: int, precheck: Precheck | None = None) -> None:
    """Run call ``call_pk`` if it is still runnable; a no-op for a call already claimed or done.

    ``precheck`` adds checks under the claim's locks (resume uses it to revalidate an approval).
    """
    claim = _claim(call_pk, precheck)
    if claim is None:
        return
    outcome = _run(claim)
    _record(claim, outcome)


def _lock(call_pk: int) -> tuple[Operation, ToolCall]:
    # Lock order everywhere: operation, then its children.
    operation_pk = ToolCall.objects.values_list("operation_id", flat=True).get(pk=call_pk)
    operation = Operation.objects.select_for_update().select_related("tenant").get(pk=operation_pk)
    call = ToolCall.objects.select_for_update().select_related("turn").get(pk=call_pk)
    return operation, call


def _claim(call_pk: int, precheck: Precheck | None) -> Claim | None:
    with transaction.atomic(durable=True):
        operation, call = _lock(call_pk)
        if operation.state in OPERATION_TERMINAL:
            return None
        if call.state not in (CallState.PROPOSED, CallState.APPROVED):
            return None
        spec = registry.get(call.tool_name)
        assert spec is not None, "dispatch only queues calls whose tool resolved"
        problem = precheck(operation, call) if precheck else None
        if problem:
            code, message = problem
            call_finish(
                operation=operation,
                call=call,
                to_state=CallState.REJECTED,
                model_result=error(code, message),
                actor=ACTOR,
            )
            call_set_settle(operation=operation, turn_id=call.turn_id, actor=ACTOR)
            return None
        arguments = call.arguments or {}
        context = tool_context(operation, call)
        if spec.idempotency_key is not None:
            call.idempotency_key = spec.idempotency_key(context, arguments)
            context = tool_context(operation, call)
            if not _reserve_key(operation, call, spec, arguments):
                return None
        call.attempt += 1
        call.lease_token = secrets.token_hex(16)
        call.lease_expires_at = timezone.now() + timedelta(milliseconds=settings.CALLGATE_LEASE_MS)
        call_transition(
            operation=operation,
            call=call,
            to_state=CallState.EXECUTING,
            actor=ACTOR,
            details={"idempotency_key": call.idempotency_key},
            update_fields=["attempt", "lease_token", "lease_expires_at", "idempotency_key"],
        )
        call_set_settle(operation=operation, turn_id=call.turn_id, actor=ACTOR)
        return Claim(call.pk, call.lease_token, spec, context, arguments)


def _reserve_key(
    operation: Operation, call: ToolCall, spec: ToolSpec, arguments: Mapping[str, Any]
) -> bool:
    """Stripe semantics on (tenant, tool, key). True when this call holds the key and may run;
    otherwise the call got its result (stored or ``IDEMPOTENCY_KEY_REUSED``) or was re-queued."""
    intent = digest({"tool": spec.name, "arguments": arguments})
    lookup = {"tenant": operation.tenant, "tool_name": spec.name, "key": call.idempotency_key}
    records = IdempotencyRecord.objects.select_for_update(of=("self",)).select_related("call")
    record = records.filter(**lookup).first()
    if record is None:
        try:
            with transaction.atomic():
                IdempotencyRecord.objects.create(**lookup, request_sha256=intent, call=call)
            return True
        except IntegrityError:  # another call reserved the key a moment ago
            record = records.get(**lookup)
    if record.request_sha256 != intent:
        _finish_early(
            operation,
            call,
            CallState.REJECTED,
            error(
                ErrorCode.IDEMPOTENCY_KEY_REUSED,
                "This request reuses the key of an earlier, different request; nothing was done.",
            ),
        )
    elif record.state == IdempotencyRecord.State.DONE and record.model_result is not None:
        _finish_early(operation, call, CallState.SUPPRESSED, record.model_result)
    elif record.call.state == CallState.EXECUTING and call.key_waits < settings.CALLGATE_KEY_WAITS:
        # Same intent running elsewhere right now: never run it twice; look again shortly.
        call.key_waits += 1
        call.save(update_fields=["idempotency_key", "key_waits", "updated_at"])
        audit_record(
            operation=operation,
            kind="call.key_in_flight",
            actor=ACTOR,
            call=call,
            details={"idempotency_key": call.idempotency_key, "wait": call.key_waits},
        )
        enqueue_execute(call_pk=call.pk, countdown_s=IN_FLIGHT_RECHECK_S)
    else:
        # The holder's outcome is unknown (or it outlived every wait): only a human or the
        # reconciler can tell whether the effect happened, so this call does nothing.
        message = (
            "An identical request is still in flight or its outcome is unknown; nothing was "
            "done. It can be tried again once that is settled."
        )
        _finish_early(
            operation, call, CallState.REJECTED, error(ErrorCode.IDEMPOTENCY_KEY_IN_FLIGHT, message)
        )
    return False


def _finish_early(
    operation: Operation, call: ToolCall, state: str, model_result: Mapping[str, Any]
) -> None:
    call.save(update_fields=["idempotency_key", "updated_at"])
    call_finish(
        operation=operation,
        call=call,
        to_state=state,
        model_result=model_result,
        actor=ACTOR,
        details={"idempotency_key": call.idempotency_key},
    )
    call_set_settle(operation=operation, turn_id=call.turn_id, actor=ACTOR)


def _run(claim: Claim) -> HandlerOutcome:
    """Run the handler in its own thread so its timeout (``timeout_ms``) can be enforced.

    A handler that outlives its timeout keeps running in the background; the call is recorded
    as timed out and, for side-effecting tools, as an unknown outcome.
    """
    box: list[HandlerOutcome] = []

    def target() -> None:
        try:
            data = claim.spec.handler(claim.context, claim.arguments)
            box.append(HandlerOutcome("ok", data=data))
        except ToolError as exc:
            box.append(HandlerOutcome("tool_error", tool_error=exc))
        except Exception as exc:  # a handler bug must not take the loop down with it
            box.append(HandlerOutcome("crash", detail=f"{type(exc).__name__}: {exc}"))
        finally:
            connections.close_all()

    thread = threading.Thread(target=target, name=f"tool-{claim.spec.name}", daemon=True)
    thread.start()
    thread.join(claim.spec.timeout_ms / 1000)
    if not box:
        return HandlerOutcome("timeout", detail=f"no answer within {claim.spec.timeout_ms} ms")
    return box[0]


def _record(claim: Claim, outcome: HandlerOutcome) -> None:
    close_old_connections()
    with transaction.atomic(durable=True):
        operation, call = _lock(claim.call_pk)
        if call.state != CallState.EXECUTING or call.lease_token != claim.lease_token:
            audit_record(
                operation=operation,
                kind="call.stale_result_refused",
                actor=ACTOR,
                call=call,
                details={"outcome": outcome.kind, "state": call.state},
            )
            return
        side_effects = claim.spec.has_side_effects
        if outcome.kind in ("crash", "timeout") and side_effects:
            call.lease_token = ""
            call_transition(
                operation=operation,
                call=call,
                to_state=CallState.UNKNOWN_OUTCOME,
                actor=ACTOR,
                details={"outcome": outcome.kind, "detail": outcome.detail},
                update_fields=["lease_token"],
            )
        else:
            state, result, audit = _envelope(outcome)
            call_finish(
                operation=operation,
                call=call,
                to_state=state,
                model_result=result,
                actor=ACTOR,
                audit=audit,
            )
            if side_effects:
                _settle_key(operation, call, state, result)
        call_set_settle(operation=operation, turn_id=call.turn_id, actor=ACTOR)


def _settle_key(
    operation: Operation, call: ToolCall, state: str, result: Mapping[str, Any]
) -> None:
    """A success is the intent's stored result; a refusal (``ToolError``, raised before any
    effect by contract) releases the key so a corrected request can run."""
    record = IdempotencyRecord.objects.filter(
        tenant=operation.tenant, tool_name=call.tool_name, key=call.idempotency_key
    )
    if state == CallState.SUCCEEDED:
        record.update(state=IdempotencyRecord.State.DONE, model_result=result)
    else:
        record.delete()


def _envelope(outcome: HandlerOutcome) -> tuple[str, dict[str, Any], dict[str, Any]]:
    if outcome.kind == "ok":
        return CallState.SUCCEEDED, ok(outcome.data), {}
    if outcome.kind == "tool_error":
        assert outcome.tool_error is not None
        exc = outcome.tool_error
        return CallState.FAILED, error(exc.code, exc.message), exc.audit
    code = ErrorCode.TOOL_TIMEOUT if outcome.kind == "timeout" else ErrorCode.TOOL_FAILED
    message = (
        "The tool did not answer in time."
        if outcome.kind == "timeout"
        else ("The tool failed unexpectedly.")
    )
    return CallState.FAILED, error(code, message), {"detail": outcome.detail}
