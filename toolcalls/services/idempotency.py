"""At most one effect per business intent: idempotency records with Stripe semantics on
(tenant, tool, key) (DESIGN.md §6).

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
from django.db import IntegrityError, transaction

from toolcalls.binding import digest
from toolcalls.envelopes import ErrorCode, error
from toolcalls.models import IdempotencyRecord, Operation, ToolCall
from toolcalls.registry import ToolSpec
from toolcalls.services.audit import audit_record
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.results import call_finish, call_set_settle
from toolcalls.states import CallState

ACTOR = "worker"
#: Seconds before a call whose key is held by a running call is looked at again.
IN_FLIGHT_RECHECK_S = 1.0


def key_reserve(
    *, operation: Operation, call: ToolCall, spec: ToolSpec, arguments: Mapping[str, Any]
) -> bool:
    """True when ``call`` holds its key (new, or already its own) and may run; otherwise the call
    got its result or was re-queued. The caller holds the operation and call locks."""
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
    if record.call_id == call.pk and record.state == IdempotencyRecord.State.IN_FLIGHT:
        return True  # this call's own retry (read tool) or reconciled "not applied"
    if record.request_sha256 != intent:
        message = "This request reuses the key of an earlier, different request; nothing was done."
        _finish_early(
            operation, call, CallState.REJECTED, error(ErrorCode.IDEMPOTENCY_KEY_REUSED, message)
        )
    elif record.state == IdempotencyRecord.State.DONE and record.model_result is not None:
        _finish_early(operation, call, CallState.SUPPRESSED, record.model_result)
    elif record.call.state == CallState.EXECUTING and call.key_waits < settings.CALLGATE_KEY_WAITS:
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
        # The holder's outcome is unknown (or it outlived every wait): only the reconciler or a
        # human can tell whether the effect happened, so this call does nothing.
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


def key_settle(*, operation: Operation, call: ToolCall, applied: bool | None) -> None:
    """After a side effect's outcome is known: ``applied`` True stores the call's result as the
    intent's answer, False releases the key, None (outcome still unknown) keeps it held."""
    if applied is None:
        return
    record = IdempotencyRecord.objects.filter(
        tenant=operation.tenant, tool_name=call.tool_name, key=call.idempotency_key
    )
    if applied:
        record.update(state=IdempotencyRecord.State.DONE, model_result=call.model_result)
    else:
        record.delete()
