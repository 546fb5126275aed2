"""A call still running when its operation ends (cancelled, stopped) is recorded as it ends, and
never strands anything: nothing runs again for an ended operation, a lost side effect waits for
a person with its key held (or is released when its reconciler says it did not happen), and the
recovery sweep goes on past a row it cannot handle."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests import replies as r
from tests.engine import start
from toolcalls.actors import Actor
from toolcalls.models import IdempotencyRecord, Operation, ToolCall
from toolcalls.registry import Reconciliation, ToolContext
from toolcalls.services import execution, recovery
from toolcalls.services.operations import operation_cancel
from toolcalls.services.reconcile import call_resolve
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
C = CallState
Handler = Callable[[ToolContext, Mapping[str, Any]], dict[str, Any]]


def _cancel(ctx: ToolContext) -> None:
    operation = Operation.objects.get(public_id=ctx.operation_id)
    operation_cancel(operation_pk=operation.pk, actor=Actor.system("test"), reason="stop")


@pytest.fixture
def released() -> Any:
    """An event the hanging handlers wait on, set when the test ends."""
    event = threading.Event()
    yield event
    event.set()


def _cancels_then_hangs(runs: list[int], released: threading.Event) -> Handler:
    """A handler whose first run cancels its operation, then outlives its timeout."""

    def handler(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        runs.append(1)
        if len(runs) == 1:
            _cancel(ctx)
            released.wait(2)
        return {"done": len(runs)}

    return handler


def _run(demo: Any, tool: Any, handler: Handler, **fields: Any) -> tuple[Operation, ToolCall]:
    tool(name="ended_tool", handler=handler, **{"timeout_ms": 200, **fields})
    replies = [r.response(r.call("e", "ended_tool", {})), r.final()]
    operation = start(demo, replies, tool_names=["ended_tool"])
    operation.refresh_from_db()
    return operation, operation.calls.get()


def _write(reconcile: Any = None) -> dict[str, Any]:
    return {"risk": "write", "idempotency_key": lambda c, a: "ended:one", "reconcile": reconcile}


def _key_state() -> str | None:
    record = IdempotencyRecord.objects.first()
    return record.state if record else None


def test_a_side_effect_lost_after_its_operation_was_cancelled_waits_for_a_person(
    demo, tool, released
) -> None:
    runs: list[int] = []
    operation, call = _run(demo, tool, _cancels_then_hangs(runs, released), **_write())
    # Was: escalating a cancelled operation raised, and the call stayed EXECUTING for ever.
    assert operation.state == S.CANCELLED
    assert call.state == C.UNKNOWN_OUTCOME and _key_state() == "IN_FLIGHT" and runs == [1]
    assert not operation.events.filter(to_state=S.ESCALATED).exists()
    call_resolve(call_pk=call.pk, actor=Actor.system("test"), resolution="not_applied")
    call.refresh_from_db()
    operation.refresh_from_db()
    assert (call.state, call.error_code) == (C.FAILED, "NOT_APPLIED")
    assert operation.state == S.CANCELLED and _key_state() is None


def test_a_read_lost_after_its_operation_was_cancelled_is_not_tried_again(
    demo, tool, released
) -> None:
    runs: list[int] = []
    operation, call = _run(demo, tool, _cancels_then_hangs(runs, released))
    assert operation.state == S.CANCELLED and runs == [1]
    # Was: back to PROPOSED and queued for an operation that runs nothing any more.
    assert (call.state, call.error_code) == (C.FAILED, "TIMEOUT")
    assert "its operation ended" in (call.model_result or {})["error"]["message"]


@pytest.mark.parametrize(
    ("applied", "state", "key"),
    [
        (False, C.FAILED, None),  # released: nothing took effect under it
        (None, C.UNKNOWN_OUTCOME, "IN_FLIGHT"),  # held until a person records the outcome
        (True, C.SUCCEEDED, "DONE"),
    ],
)
def test_a_reconciled_side_effect_of_a_cancelled_operation_is_settled_not_retried(
    demo, tool, released, caplog, applied, state, key
) -> None:
    runs: list[int] = []
    answer = Reconciliation(applied=applied, data={"done": 1} if applied else {})
    handler = _cancels_then_hangs(runs, released)
    operation, call = _run(demo, tool, handler, **_write(lambda ctx, k: answer))
    # Was: not applied went back to PROPOSED (its key held for ever), cannot tell raised.
    assert operation.state == S.CANCELLED and runs == [1]
    assert call.state == state and _key_state() == key
    assert not operation.events.filter(to_state=S.ESCALATED).exists()
    assert not [record for record in caplog.records if record.levelname == "ERROR"]


def test_a_retry_queued_before_the_cancel_is_dropped_and_its_key_released(
    demo, tool, released, monkeypatch
) -> None:
    runs: list[int] = []

    def hangs_once(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        runs.append(1)
        if len(runs) == 1:
            released.wait(2)
        return {"done": len(runs)}

    not_applied = Reconciliation(applied=False)
    # The retry's wake-up is not taken before the operation is cancelled.
    monkeypatch.setattr("toolcalls.services.reconcile.enqueue_execute", lambda *a, **kw: None)
    operation, call = _run(demo, tool, hangs_once, **_write(lambda ctx, k: not_applied))
    assert call.state == C.PROPOSED and _key_state() == "IN_FLIGHT"
    operation_cancel(operation_pk=operation.pk, actor=Actor.system("test"), reason="stop")
    # The sweep hands the queued retry out again; its claim drops it.
    assert recovery.recovery_sweep(now=timezone.now() + timedelta(minutes=10))["calls"] == 1
    call.refresh_from_db()
    assert (call.state, call.error_code) == (C.REJECTED, "NOT_APPLIED")
    assert _key_state() is None and runs == [1]
    assert recovery.recovery_sweep(now=timezone.now() + timedelta(minutes=10))["calls"] == 0


def test_the_sweep_settles_a_lost_side_effect_of_a_cancelled_operation(
    demo, tool, monkeypatch
) -> None:
    monkeypatch.setattr(execution, "_record", lambda claim, outcome: None)  # the worker dies
    tool(name="ended_tool", handler=lambda ctx, args: {}, **_write())
    operation = start(demo, [r.response(r.call("e", "ended_tool", {})), r.final()])
    call = operation.calls.get()
    operation_cancel(operation_pk=operation.pk, actor=Actor.system("test"), reason="stop")
    ToolCall.objects.filter(pk=call.pk).update(lease_expires_at=timezone.now())
    # Was: IllegalTransition CANCELLED -> ESCALATED on every sweep, the call EXECUTING for ever.
    assert recovery.recovery_sweep()["call_leases"] == 1
    call.refresh_from_db()
    assert call.state == C.UNKNOWN_OUTCOME and _key_state() == "IN_FLIGHT"


def test_a_row_the_sweep_cannot_handle_does_not_stop_the_others(
    demo, tool, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(execution, "_record", lambda claim, outcome: None)  # the workers die
    tool(name="ended_tool", handler=lambda ctx, args: {})
    replies = [r.response(r.call("e", "ended_tool", {})), r.final()]
    first, second = (start(demo, replies).calls.get().pk for _ in range(2))
    ToolCall.objects.update(lease_expires_at=timezone.now())
    reap = recovery._reap_call

    def broken_first(call_pk: int) -> bool:
        if call_pk == first:
            raise RuntimeError("a row that cannot be handled")
        return reap(call_pk)

    monkeypatch.setattr(recovery, "_reap_call", broken_first)
    assert recovery.recovery_sweep()["call_leases"] == 1
    attempts = dict(ToolCall.objects.values_list("pk", "attempt"))
    assert (attempts[first], attempts[second]) == (1, 2)  # the second read ran again
    assert f"row {first} not handled" in caplog.text


def test_a_calls_lease_outlasts_its_handlers_time(demo, tool, settings) -> None:
    """The recovery sweep must never take back a call whose handler may still be within its
    timeout: it would settle as lost (and ask the reconciler about) an effect still running."""
    settings.CALLGATE_LEASE_MS = 1_000
    leases: list[float] = []

    def handler(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        expires = ToolCall.objects.get(public_id=ctx.call_id).lease_expires_at
        assert expires is not None
        leases.append((expires - timezone.now()).total_seconds())
        return {}

    _run(demo, tool, handler, timeout_ms=60_000)
    (left_s,) = leases
    assert left_s > 60  # was: CALLGATE_LEASE_MS, 1 s
