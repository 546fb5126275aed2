"""At most one effect per business intent: idempotency records, unique on (tenant, tool, key)
(docs/design.md §6).

Same key and same canonical request: the stored result, nothing runs (SUPPRESSED). Same key,
different request: ``IDEMPOTENCY_KEY_REUSED``. Key held by a call still running: wait (bounded),
never run twice. Key held by a call whose outcome is unknown: ``IDEMPOTENCY_KEY_IN_FLIGHT``.
A success stores its result; a refusal (``ToolError``, raised before any effect by contract)
releases the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

from toolcalls.actors import WORKER
from toolcalls.binding import digest
from toolcalls.envelopes import ErrorCode, error
from toolcalls.models import IdempotencyRecord, Operation, ToolCall
from toolcalls.registry import ToolSpec
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.results import call_finish
from toolcalls.services.unit import Step
from toolcalls.services.writes import row_insert_new
from toolcalls.states import AuditKind, CallState

#: Seconds before a call whose key is held by a running call is looked at again.
IN_FLIGHT_RECHECK_S = 1.0


def key_reserve(
    step: Step, call: ToolCall, *, spec: ToolSpec, arguments: Mapping[str, Any]
) -> bool:
    """True when ``call`` (held by ``step``) holds its key (new, or already its own) and may
    run; otherwise the call got its result or was re-queued."""
    intent = digest({"tool": spec.name, "arguments": arguments})
    record = _record_for(step.operation, call, spec, intent)
    if record is None:
        return True
    if record.call_id == call.pk and record.state == IdempotencyRecord.State.IN_FLIGHT:
        return True  # this call's own retry (read tool) or reconciled "not applied"
    if record.request_sha256 != intent:
        message = "This request reuses the key of an earlier, different request; nothing was done."
        result = error(ErrorCode.IDEMPOTENCY_KEY_REUSED, message)
        _finish_early(step, call, CallState.REJECTED, result)
    elif record.state == IdempotencyRecord.State.DONE and record.model_result is not None:
        _finish_early(step, call, CallState.SUPPRESSED, record.model_result, record.call)
    elif record.call.state == CallState.EXECUTING and call.key_waits < settings.CALLGATE_KEY_WAITS:
        _wait(step, call)
    else:
        # The holder's outcome is unknown (or it outlived every wait): only the reconciler or a
        # human can tell whether the effect happened, so this call does nothing.
        message = (
            "An identical request is still in flight or its outcome is unknown; nothing was "
            "done. It can be tried again once that is settled."
        )
        result = error(ErrorCode.IDEMPOTENCY_KEY_IN_FLIGHT, message)
        _finish_early(step, call, CallState.REJECTED, result)
    return False


def _record_for(
    operation: Operation, call: ToolCall, spec: ToolSpec, intent: str
) -> IdempotencyRecord | None:
    """The key's record, locked; ``None`` when this call just reserved the key (one statement:
    the reservation, which leaves a key already held as it is)."""
    lookup = {"tenant": operation.tenant, "tool_name": spec.name, "key": call.idempotency_key}
    records = IdempotencyRecord.objects.select_for_update(of=("self",)).select_related("call")
    while not row_insert_new(IdempotencyRecord(**lookup, request_sha256=intent, call=call)):
        record = records.filter(**lookup).first()
        if record is not None:
            return record
        # Its holder released the key between the two statements: reserve it again.
    return None


def _wait(step: Step, call: ToolCall) -> None:
    """The key's holder is still running: look again shortly, never run twice."""
    call.key_waits += 1
    step.change(call, "key_waits")
    step.audit(
        kind=AuditKind.CALL_KEY_IN_FLIGHT,
        actor=WORKER,
        call=call,
        details={"idempotency_key": call.idempotency_key, "wait": call.key_waits},
    )
    enqueue_execute(step, call_pk=call.pk, countdown_s=IN_FLIGHT_RECHECK_S)


def _finish_early(
    step: Step,
    call: ToolCall,
    state: str,
    model_result: Mapping[str, Any],
    settled_by: ToolCall | None = None,
) -> None:
    """End ``call`` without running it; ``settled_by``: the call whose result answers it."""
    details = {"idempotency_key": call.idempotency_key}
    if settled_by is not None:
        details["settled_by"] = settled_by.public_id
    call_finish(
        step, call, to_state=state, model_result=model_result, actor=WORKER, details=details
    )


def key_settle(step: Step, call: ToolCall, *, applied: bool | None) -> None:
    """After a side effect's outcome is known: ``applied`` True stores the call's result as the
    intent's answer (written with the step's other writes), False releases the key, None
    (outcome still unknown) keeps it held. The key's record is the one ``call`` holds, named
    by its step's read of the call (``idempotency_record_id``, :func:`unit.call_step`)."""
    record_pk: int | None = getattr(call, "idempotency_record_id", None)
    if applied is None or record_pk is None:
        return
    if applied:
        record = IdempotencyRecord(pk=record_pk, state=IdempotencyRecord.State.DONE)
        record.model_result = call.model_result
        record._state.adding = False
        step.change(record, "state", "model_result")
    else:
        IdempotencyRecord.objects.filter(pk=record_pk).delete()
