"""The recovery sweep hands out again what dead workers and lost messages left behind, fenced
and bounded, and audits what it does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError

from tests import replies as r
from tests.engine import bundled_replies, operator, start
from toolcalls import tasks
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation, ToolCall
from toolcalls.services import enqueue, turns
from toolcalls.services.recovery import recovery_sweep
from toolcalls.services.unit import Step
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
LATER = timedelta(minutes=10)


def _sweep() -> dict[str, int]:
    return recovery_sweep(now=timezone.now() + LATER)


def test_an_operation_whose_wake_up_the_broker_refused_is_picked_up(demo, monkeypatch) -> None:
    refused: list[list[int]] = []

    def broker_down(args: list[int], **kwargs: object) -> None:
        refused.append(args)
        raise KombuOperationalError("connection refused")

    monkeypatch.setattr(tasks.run_turn, "apply_async", broker_down)
    # The operation was committed: starting it succeeds (no error for a client to retry).
    operation = start(demo, [r.final("done")])
    monkeypatch.undo()
    operation.refresh_from_db()
    assert operation.state == S.PENDING and refused == [[operation.pk]]
    Operation.objects.filter(pk=operation.pk).update(updated_at=timezone.now() - LATER)
    assert recovery_sweep()["operations"] == 1
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    assert operation.events.filter(kind="recovery.requeued").count() == 1


def test_a_turn_whose_worker_died_is_claimed_again_and_the_old_reply_refused(
    demo, monkeypatch
) -> None:
    monkeypatch.setattr("toolcalls.services.operations.enqueue_turn", lambda *a, **kw: None)
    operation = start(demo, [r.final("only")], tool_names=[])
    monkeypatch.undo()
    claim = turns._claim(operation.pk)  # a worker claimed the turn, then died
    assert claim is not None
    assert recovery_sweep()["turn_leases"] == 0  # the lease is still valid: nothing to do yet
    Operation.objects.filter(pk=operation.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert recovery_sweep()["turn_leases"] == 1
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED and operation.turn_count == 1
    reply, parsed = turns._request(claim)
    turns._record(claim, reply, parsed, 1)  # the dead worker comes back: refused
    operation.refresh_from_db()
    assert operation.turn_count == 1
    assert operation.events.filter(kind="turn.stale_reply_refused").exists()
    assert operation.events.filter(kind="recovery.turn_lease_expired").count() == 1


def test_an_expired_turn_lease_is_fenced_once_however_often_the_sweep_runs(
    demo, monkeypatch
) -> None:
    monkeypatch.setattr("toolcalls.services.operations.enqueue_turn", lambda *a, **kw: None)
    operation = start(demo, [r.final("only")], tool_names=[])
    claim = turns._claim(operation.pk)  # a worker claimed the turn, then died
    assert claim is not None
    Operation.objects.filter(pk=operation.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    # No worker picks the wake-up up before the next sweeps run (a busy queue).
    monkeypatch.setattr("toolcalls.services.recovery.enqueue_turn", lambda *a, **kw: None)
    assert [recovery_sweep()["turn_leases"] for _ in range(3)] == [1, 0, 0]
    operation.refresh_from_db()
    assert (operation.lease_token, operation.lease_expires_at) == ("", None)
    assert operation.events.filter(kind="recovery.turn_lease_expired").count() == 1


def test_a_turn_that_kills_its_worker_every_time_fails(demo, settings, monkeypatch) -> None:
    settings.CALLGATE_MAX_TURN_ATTEMPTS = 2
    monkeypatch.setattr("toolcalls.services.operations.enqueue_turn", lambda *a, **kw: None)
    operation = start(demo, [r.final("never")], tool_names=[])
    for _ in range(2):
        assert turns._claim(operation.pk) is not None  # then the worker dies
        Operation.objects.filter(pk=operation.pk).update(lease_expires_at=timezone.now())
    assert turns._claim(operation.pk) is None
    operation.refresh_from_db()
    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("POISON_TURN")


def _die_while_executing(call: ToolCall) -> None:
    """As if the worker running ``call`` was killed: EXECUTING, lease now expired."""
    ToolCall.objects.filter(pk=call.pk).update(
        state=CallState.EXECUTING,
        attempt=call.attempt + 1,
        lease_token="dead-worker",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )


def test_a_side_effect_whose_worker_died_is_reconciled(demo, monkeypatch) -> None:
    operation = start(demo, bundled_replies("refund_approve"))
    submit = operation.calls.get(tool_name="submit_refund")
    # The worker died after the refund was paid but before its result was recorded.
    from approvals.services import approval_decide
    from toolcalls.services import execution

    monkeypatch.setattr(execution, "_record", lambda claim, outcome: None)
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    monkeypatch.undo()
    submit.refresh_from_db()
    assert submit.state == CallState.EXECUTING and LedgerEntry.objects.count() == 1
    ToolCall.objects.filter(pk=submit.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert recovery_sweep()["call_leases"] == 1
    submit.refresh_from_db()
    operation.refresh_from_db()
    assert submit.state == CallState.SUCCEEDED  # the ledger says it happened
    assert operation.state == S.COMPLETED and LedgerEntry.objects.count() == 1
    kinds = list(operation.events.values_list("kind", flat=True))
    assert "recovery.call_lease_expired" in kinds


def test_a_read_call_whose_worker_died_runs_again(demo, monkeypatch) -> None:
    from toolcalls.services import execution

    monkeypatch.setattr(execution, "_record", lambda claim, outcome: None)
    operation = start(
        demo, [r.response(r.call("g", "get_order", {"order_id": "ORD-1001"})), r.final()]
    )
    monkeypatch.undo()
    call = operation.calls.get()
    assert call.state == CallState.EXECUTING
    ToolCall.objects.filter(pk=call.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    recovery_sweep()
    call.refresh_from_db()
    operation.refresh_from_db()
    assert (call.state, call.attempt) == (CallState.SUCCEEDED, 2)
    assert operation.state == S.COMPLETED


def test_a_call_whose_wake_up_was_lost_is_handed_out_again(demo, monkeypatch) -> None:
    # The wake-up that hands the call to a worker is lost.
    monkeypatch.setattr("toolcalls.services.dispatch.enqueue_execute", lambda *a, **kw: None)
    operation = start(
        demo, [r.response(r.call("g", "get_order", {"order_id": "ORD-1001"})), r.final()]
    )
    monkeypatch.undo()
    call = operation.calls.get()
    assert call.state == CallState.PROPOSED and call.queued_at
    assert recovery_sweep()["calls"] == 0  # not stranded yet
    assert _sweep()["calls"] == 1
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED


def test_an_approved_call_whose_resume_was_lost_resumes(demo, monkeypatch) -> None:
    from approvals.services import approval_decide

    operation = start(demo, bundled_replies("refund_approve"))
    monkeypatch.setattr("toolcalls.services.approvals.enqueue_resume", lambda *a, **kw: None)
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    monkeypatch.undo()
    assert operation.calls.get(tool_name="submit_refund").state == CallState.APPROVED
    assert _sweep()["calls"] == 1
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED and LedgerEntry.objects.count() == 1


def test_enqueue_is_only_a_wake_up(demo) -> None:
    """Nothing is decided by a message: duplicate wake-ups change nothing."""
    operation = start(demo, [r.final("done")])
    for _ in range(3):
        step = Step(operation)
        enqueue.enqueue_turn(step, operation_pk=operation.pk)
        step.flush()
    operation.refresh_from_db()
    assert operation.turn_count == 1
