"""At most one effect per business intent: what a call finds when it reserves its key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.engine import call_set, wakeups_in
from tests.factories import ModelTurnFactory, ToolCallFactory
from toolcalls import registry
from toolcalls.actors import WORKER
from toolcalls.binding import digest
from toolcalls.envelopes import ok
from toolcalls.models import IdempotencyRecord, ToolCall
from toolcalls.registry import ToolSpec
from toolcalls.services import idempotency
from toolcalls.services.idempotency import key_reserve, key_settle
from toolcalls.services.unit import call_step
from toolcalls.states import AuditKind, CallState

pytestmark = pytest.mark.django_db
Capture = Callable[..., Any]
KEY = "refund:cus_1001:ORD-1001:100:RD-1"
ARGUMENTS = {"order_id": "ORD-1001", "draft_id": "RD-1", "amount_cents": 100}


def _spec() -> ToolSpec:
    spec = registry.get("submit_refund")
    assert spec is not None
    return spec


def _call(state: str = CallState.PROPOSED, **fields: Any) -> ToolCall:
    [call] = call_set(
        state, tool_name="submit_refund", arguments=ARGUMENTS, idempotency_key=KEY, **fields
    )
    return call


def _reserve(call: ToolCall, arguments: dict[str, Any] = ARGUMENTS) -> bool:
    with call_step(call.pk) as step:
        return key_reserve(step, step.call, spec=_spec(), arguments=arguments)


def _holder(state: str, record_state: str, model_result: Any = None) -> ToolCall:
    holder = _call(state)
    IdempotencyRecord.objects.create(
        tenant=holder.operation.tenant,
        tool_name="submit_refund",
        key=KEY,
        request_sha256=_intent(),
        call=holder,
        state=record_state,
        model_result=model_result,
    )
    return holder


def _intent() -> str:
    return digest({"tool": "submit_refund", "arguments": ARGUMENTS})


def _sibling(holder: ToolCall) -> ToolCall:
    turn = ModelTurnFactory.create(operation=holder.operation, index=1)
    return ToolCallFactory.create(
        turn=turn, tool_name="submit_refund", arguments=ARGUMENTS, idempotency_key=KEY
    )


def test_a_new_key_is_reserved_and_the_call_may_run() -> None:
    call = _call()
    assert _reserve(call) is True
    record = IdempotencyRecord.objects.get()
    assert (record.call_id, record.state) == (call.pk, IdempotencyRecord.State.IN_FLIGHT)
    assert _reserve(call) is True  # its own retry holds it already


def test_a_new_key_is_reserved_in_one_statement() -> None:
    call = _call()
    with call_step(call.pk) as step, CaptureQueriesContext(connection) as captured:
        assert key_reserve(step, step.call, spec=_spec(), arguments=ARGUMENTS) is True
    [statement] = [query["sql"] for query in captured.captured_queries]
    assert statement.startswith("INSERT") and "RETURNING" in statement


def test_a_key_released_between_the_reservation_and_the_read_is_reserved_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts: list[bool] = []

    def insert_new(row: IdempotencyRecord) -> bool:
        attempts.append(bool(attempts) and writes_insert_new(row))
        return attempts[-1]  # the first finds the key held, by a holder gone at the read

    writes_insert_new = idempotency.row_insert_new
    monkeypatch.setattr(idempotency, "row_insert_new", insert_new)
    call = _call()
    assert _reserve(call) is True
    assert attempts == [False, True]
    assert IdempotencyRecord.objects.get().call_id == call.pk


def test_the_same_intent_done_before_is_answered_from_the_record() -> None:
    holder = _holder(CallState.SUCCEEDED, IdempotencyRecord.State.DONE, ok({"refund": "RF-1"}))
    call = _sibling(holder)
    assert _reserve(call) is False
    call.refresh_from_db()
    assert call.state == CallState.SUPPRESSED and call.model_result is not None
    assert call.model_result["data"] == {"refund": "RF-1"}


def test_a_key_reused_for_another_request_is_refused() -> None:
    holder = _holder(CallState.SUCCEEDED, IdempotencyRecord.State.DONE, ok({}))
    call = _sibling(holder)
    assert _reserve(call, {**ARGUMENTS, "amount_cents": 200}) is False
    call.refresh_from_db()
    assert call.state == CallState.REJECTED and call.error_code == "IDEMPOTENCY_KEY_REUSED"


def test_a_call_whose_twin_is_running_waits_and_is_woken_again(
    django_capture_on_commit_callbacks: Capture,
) -> None:
    holder = _holder(CallState.EXECUTING, IdempotencyRecord.State.IN_FLIGHT)
    call = _sibling(holder)
    with django_capture_on_commit_callbacks() as wakeups:
        assert _reserve(call) is False
    call.refresh_from_db()
    assert (call.state, call.key_waits) == (CallState.PROPOSED, 1)
    assert call.events.get().kind == "call.key_in_flight"
    assert len(wakeups_in(wakeups)) == 1


def test_a_call_whose_twin_has_an_unknown_outcome_does_nothing() -> None:
    holder = _holder(CallState.UNKNOWN_OUTCOME, IdempotencyRecord.State.IN_FLIGHT)
    call = _sibling(holder)
    assert _reserve(call) is False
    call.refresh_from_db()
    assert call.error_code == "IDEMPOTENCY_KEY_IN_FLIGHT"


@pytest.mark.parametrize(
    ("applied", "left"),
    [
        (True, [IdempotencyRecord.State.DONE]),
        (False, []),
        (None, [IdempotencyRecord.State.IN_FLIGHT]),
    ],
)
def test_settling_a_key_stores_releases_or_keeps_it(applied: bool | None, left: list[str]) -> None:
    call = _call(CallState.SUCCEEDED, model_result=ok({"refund": "RF-1"}))
    assert _reserve(call) is True
    with call_step(call.pk) as step:
        key_settle(step, step.call, applied=applied)
    assert list(IdempotencyRecord.objects.values_list("state", flat=True)) == left


def test_a_key_settled_as_applied_is_written_with_the_step_s_other_writes() -> None:
    call = _call(CallState.SUCCEEDED, model_result=ok({"refund": "RF-1"}))
    assert _reserve(call) is True
    reserved = IdempotencyRecord.objects.get()
    with CaptureQueriesContext(connection) as captured, call_step(call.pk) as step:
        key_settle(step, step.call, applied=True)
        step.audit(kind=AuditKind.CALL_TRANSITION, actor=WORKER, call=step.call)
    sql = [query["sql"] for query in captured.captured_queries]
    assert not [s for s in sql if s.startswith('UPDATE "toolcalls_idempotencyrecord"')]
    [write] = [s for s in sql if s.startswith("WITH")]
    assert 'UPDATE "toolcalls_idempotencyrecord"' in write
    settled = IdempotencyRecord.objects.get()
    assert (settled.state, settled.model_result) == ("DONE", ok({"refund": "RF-1"}))
    assert settled.updated_at > reserved.updated_at
