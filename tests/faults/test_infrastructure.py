"""The broker and the database fail under the workers: Redis flushed and restarted under load,
a database connection terminated in the middle of a transaction, and a warm shutdown while
tasks run. Nothing is lost (the database says what is left to do), nothing half-written shows,
and nothing runs twice."""

from __future__ import annotations

import signal

import pytest
from django.db import connection

from tests.faults.scenarios import (
    FaultRun,
    call_path,
    claims,
    order_id,
    start_payment,
)
from toolcalls.models import IdempotencyRecord, Operation, ToolCall
from toolcalls.services.audit_verify import audit_chain_verify
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

C = CallState
S = OperationState


def completed(operations: list[Operation]) -> int:
    pks = [operation.pk for operation in operations]
    return Operation.objects.filter(pk__in=pks, state=S.COMPLETED).count()


def recovered(operations: list[Operation]) -> int:
    """Recovery actions the sweep took for these operations (each writes an audit event)."""
    return sum(op.events.filter(kind__startswith="recovery.").count() for op in operations)


def test_redis_flushed_and_restarted_under_load_loses_nothing(
    demo: object, fault: FaultRun
) -> None:
    fault.payments.slow_down(100)
    fault.workers.start(2, pool="prefork", concurrency=2)
    operations = [start_payment(demo, order_id(300 + i), 1000 + i, lookup=True) for i in range(20)]

    fault.wait(lambda: completed(operations) >= 3, what="the first operations to complete")
    fault.redis.restart()  # every queued and unacked wake-up is gone, connections drop
    # The sweep re-queues what is stranded; halfway through, the broker loses it all again.
    fault.drive(operations[:10], timeout_s=120)
    fault.redis.flush()
    operations = fault.drive(operations, timeout_s=120)

    assert [op.state for op in operations] == [S.COMPLETED] * 20
    assert recovered(operations) > 0  # the broker's losses were made good from the database
    effects = fault.payments.effects()
    assert sorted(e["order_id"] for e in effects) == sorted(order_id(300 + i) for i in range(20))
    for call in ToolCall.objects.filter(tool_name="pay_refund"):
        assert call.state == C.SUCCEEDED and claims(call) == 1, call_path(call)


def _open_transactions() -> list[int]:
    """Backends on the test database (other than this one) idle inside a transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND state = 'idle in transaction'"
        )
        return [row[0] for row in cursor.fetchall()]


def _terminate(fault: FaultRun) -> None:
    """Cut the worker's database connection while its transaction is open."""
    [pid] = fault.wait(
        lambda: (found := _open_transactions()) and len(found) == 1 and found,
        what="the worker's open transaction",
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert cursor.fetchone() == (True,)
    fault.totals.faults += 1
    fault.wait(lambda: pid not in _open_transactions(), what="the backend to go")


@pytest.mark.parametrize("point", ["call.in_record", "turn.in_record"])
def test_a_connection_terminated_mid_transaction_leaves_nothing_half_written(
    point: str, demo: object, fault: FaultRun
) -> None:
    order = order_id(4)
    fault.workers.start(faults={point: "pause"})
    operation = start_payment(demo, order)
    worker = fault.workers.by_pid(fault.workers.wait_marker(point))
    _terminate(fault)
    fault.workers.signal(worker, signal.SIGKILL)  # paused on a dead connection: release it

    operation.refresh_from_db()
    assert audit_chain_verify(operation_public_id=operation.public_id) == []
    assert operation.audit_seq == operation.events.count()
    if point == "call.in_record":  # the result, its events and the settled key: all gone
        call = operation.calls.get()
        assert (call.state, call.model_result, call.lease_token != "") == (
            C.EXECUTING,
            None,
            True,
        )
        assert not call.events.filter(to_state=C.SUCCEEDED).exists()
        assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.IN_FLIGHT
        assert operation.state == S.EXECUTING
        assert len(fault.payments.effects(order)) == 1
    else:  # the turn, its calls and their events: all gone; the claim stands
        assert (operation.state, operation.turn_count) == (S.MODEL_REQUESTED, 0)
        assert not operation.turns.exists() and not operation.calls.exists()
        assert not operation.events.filter(kind="call.proposed").exists()

    fault.workers.start(wait=False)
    [operation] = fault.drive([operation])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    assert list(operation.turns.values_list("index", flat=True)) == [0, 1]
    call = operation.calls.get()
    assert call.state == C.SUCCEEDED and claims(call) == 1
    assert len(fault.payments.effects(order)) == 1
    if point == "call.in_record":  # paid before the cut: reconciled, not paid again
        assert call_path(call)[-2:] == [
            (C.EXECUTING, C.UNKNOWN_OUTCOME),
            (C.UNKNOWN_OUTCOME, C.SUCCEEDED),
        ]


@pytest.mark.parametrize("point", ["turn.in_record", "call.in_record"])
def test_a_connection_terminated_before_the_record_commits_is_retried_by_the_same_worker(
    point: str, demo: object, fault: FaultRun
) -> None:
    order = order_id(5)
    fault.workers.start(faults={point: "hold_once"})
    operation = start_payment(demo, order)
    fault.workers.wait_marker(point)
    _terminate(fault)  # the commit that follows fails: the connection is gone
    fault.workers.release(point)
    [operation] = fault.drive([operation])

    assert operation.state == S.COMPLETED, operation.terminal_reason
    assert list(operation.turns.values_list("index", flat=True)) == [0, 1]
    call = operation.calls.get()
    # The worker recorded its own turn and result again on a new connection: no lost run, no
    # reconciliation, nothing handed out again by the recovery sweep, one payment.
    assert call.state == C.SUCCEEDED and claims(call) == 1, call_path(call)
    assert (C.EXECUTING, C.UNKNOWN_OUTCOME) not in call_path(call)
    assert recovered([operation]) == 0
    assert len(fault.payments.effects(order)) == 1


def test_a_warm_shutdown_under_load_finishes_what_it_runs(demo: object, fault: FaultRun) -> None:
    fault.payments.slow_down(300)
    first = fault.workers.start(2, pool="prefork", concurrency=2)
    # Two operations first, run to the end, then ten more: the workers' queue is first in,
    # first out, so twelve started at once can have every payment run before any final turn.
    operations = [start_payment(demo, order_id(100 + i), 2000 + i) for i in range(2)]
    fault.wait(lambda: completed(operations) >= 1, what="a first operation done")
    operations += [start_payment(demo, order_id(100 + i), 2000 + i) for i in range(2, 12)]
    fault.wait(
        lambda: ToolCall.objects.filter(state=C.EXECUTING).count() >= 2,
        what="payments in flight",
    )
    for worker in first:
        fault.workers.signal(worker, signal.SIGTERM)
    fault.wait(lambda: not any(w.alive() for w in first), what="the warm shutdown", timeout_s=60)

    # A warm shutdown finishes the tasks it runs: no call and no model request is left claimed.
    assert not ToolCall.objects.filter(state=C.EXECUTING).exists()
    assert not Operation.objects.exclude(lease_token="").exists()
    assert all(w.process.returncode == 0 for w in first)
    assert completed(operations) < 12  # there was work left for the next workers

    fault.workers.start(2, pool="prefork", concurrency=2, wait=False)
    operations = fault.drive(operations)

    assert [op.state for op in operations] == [S.COMPLETED] * 12
    assert sorted(e["order_id"] for e in fault.payments.effects()) == sorted(
        order_id(100 + i) for i in range(12)
    )
    for call in ToolCall.objects.filter(tool_name="pay_refund"):
        assert call.state == C.SUCCEEDED and claims(call) == 1, call_path(call)
    assert not any(op.events.filter(kind="recovery.call_lease_expired") for op in operations)
