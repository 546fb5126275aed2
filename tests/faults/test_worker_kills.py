"""Workers SIGKILLed around a payment and during a model request: another worker and the
recovery sweep finish the work, and the provider applies each refund exactly once."""

from __future__ import annotations

import signal

import pytest

from approvals.services import approval_decide
from tests.engine import bundled_replies, operator, start
from tests.faults.scenarios import (
    FaultRun,
    call_path,
    claims,
    order_id,
    received,
    start_payment,
)
from toolcalls.demo.models import LedgerEntry, RefundDraft
from toolcalls.models import Operation, ToolCall
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

C = CallState
#: moment → (fault point where the worker is killed, whether the refund was paid by then)
KILL_POINTS = {
    "after_claim": ("call.after_claim", False),
    "after_payment": ("faults.pay_refund.after_payment", True),
    "before_record": ("call.before_record", True),
}


@pytest.mark.parametrize("moment", list(KILL_POINTS))
def test_a_worker_killed_around_a_payment_recovers_and_pays_once(
    moment: str, demo: object, fault: FaultRun
) -> None:
    point, paid = KILL_POINTS[moment]
    order = order_id(1)
    fault.workers.start(faults={point: "pause"})
    operation = start_payment(demo, order)
    pid = fault.workers.wait_marker(point)
    fault.workers.signal(fault.workers.by_pid(pid), signal.SIGKILL)
    call = operation.calls.get()
    assert call.state == C.EXECUTING  # claimed by the dead worker
    assert len(fault.payments.effects(order)) == (1 if paid else 0)

    fault.workers.start(wait=False)  # a fresh worker without the fault
    [operation] = fault.drive([operation])

    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    call.refresh_from_db()
    assert call.state == C.SUCCEEDED
    [effect] = fault.payments.effects(order)
    assert received(operation, call.provider_call_id)["data"]["refund_id"] == effect["refund_id"]
    assert operation.events.filter(kind="recovery.call_lease_expired").count() == 1
    path = call_path(call)
    if paid:  # the provider says it happened: reconciled, never run again
        assert path[-2:] == [(C.EXECUTING, C.UNKNOWN_OUTCOME), (C.UNKNOWN_OUTCOME, C.SUCCEEDED)]
        assert claims(call) == 1
    else:  # the provider says it did not: run again under the same key, once
        assert (C.UNKNOWN_OUTCOME, C.PROPOSED) in path
        assert claims(call) == 2
    assert len(fault.payments.payment_requests(order)) == 1


@pytest.mark.parametrize("point", ["turn.after_claim", "turn.before_record"])
def test_a_worker_killed_during_a_model_request_records_the_turn_once(
    point: str, demo: object, fault: FaultRun
) -> None:
    fault.workers.start(faults={point: "pause"})
    operation = start_payment(demo, order_id(2))
    fault.workers.signal(fault.workers.by_pid(fault.workers.wait_marker(point)), signal.SIGKILL)
    operation.refresh_from_db()
    assert operation.state == OperationState.MODEL_REQUESTED and operation.lease_token
    assert not operation.turns.exists()

    fault.workers.start(wait=False)
    [operation] = fault.drive([operation])

    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    assert list(operation.turns.values_list("index", flat=True)) == [0, 1]
    assert operation.events.filter(kind="recovery.turn_lease_expired").count() == 1
    assert operation.events.filter(kind="turn.stale_reply_refused").count() == 0
    assert len(fault.payments.effects()) == 1


def test_a_worker_frozen_past_its_lease_cannot_record_its_late_result(
    demo: object, fault: FaultRun
) -> None:
    order = order_id(3)
    fault.payments.slow_down(1000)
    [frozen] = fault.workers.start()
    operation = start_payment(demo, order)
    # Paid, and waiting for the provider's (slow) answer when it stops: a VM pause or a
    # stop-the-world stall.
    fault.wait(lambda: fault.payments.effects(order), what="the payment to be applied")
    fault.workers.signal(frozen, signal.SIGSTOP)

    fault.workers.start(wait=False)
    [operation] = fault.drive([operation])  # reaped after the lease, reconciled elsewhere
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    call = operation.calls.get()
    assert call_path(call)[-2:] == [
        (C.EXECUTING, C.UNKNOWN_OUTCOME),
        (C.UNKNOWN_OUTCOME, C.SUCCEEDED),
    ]
    result = call.model_result

    frozen.process.send_signal(signal.SIGCONT)  # it wakes up with its payment's answer
    fault.wait(
        lambda: operation.events.filter(kind="call.stale_result_refused").exists(),
        what="the thawed worker's late result to be refused",
    )
    call.refresh_from_db()
    assert (call.state, call.model_result, claims(call)) == (C.SUCCEEDED, result, 1)
    assert operation.turns.count() == 2
    assert len(fault.payments.effects(order)) == len(fault.payments.payment_requests(order)) == 1


def _approve_pending(operation: Operation) -> None:
    for approval in operation.approvals.filter(state="PENDING"):
        approval_decide(approval_pk=approval.pk, actor=operator(), approve=True)


@pytest.mark.parametrize("tool", ["create_refund_draft", "submit_refund"])
def test_a_worker_killed_after_a_demo_effect_recovers_it_without_a_second_one(
    tool: str, demo: object, fault: FaultRun
) -> None:
    point = f"demo.{tool}.after_effect"
    fault.workers.start(faults={point: "pause"})
    operation = start(demo, bundled_replies("refund_approve"))
    if tool == "submit_refund":  # the draft first, then the approved refund is paid
        [operation] = fault.drive([operation])
        _approve_pending(operation)
    fault.workers.signal(fault.workers.by_pid(fault.workers.wait_marker(point)), signal.SIGKILL)

    fault.workers.start(wait=False)
    [operation] = fault.drive([operation])
    if operation.state == OperationState.WAITING_APPROVAL:  # the draft was the one recovered
        _approve_pending(operation)
        [operation] = fault.drive([operation])

    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    call = operation.calls.get(tool_name=tool)
    assert call_path(call)[-2:] == [
        (C.EXECUTING, C.UNKNOWN_OUTCOME),
        (C.UNKNOWN_OUTCOME, C.SUCCEEDED),
    ]
    assert claims(call) == 1
    assert RefundDraft.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_one_refund_asked_by_two_operations_with_the_payer_killed_is_paid_once(
    demo: object, fault: FaultRun
) -> None:
    point = "faults.pay_refund.after_payment"
    order = order_id(6)
    fault.workers.start(2, faults={point: "pause_once"})
    operations = [start_payment(demo, order), start_payment(demo, order)]  # the same intent
    fault.workers.signal(fault.workers.by_pid(fault.workers.wait_marker(point)), signal.SIGKILL)

    fault.workers.start(wait=False)
    operations = fault.drive(operations)

    assert [op.state for op in operations] == [OperationState.COMPLETED] * 2
    payer, asker = sorted(ToolCall.objects.filter(tool_name="pay_refund"), key=claims, reverse=True)
    assert (payer.state, claims(payer), claims(asker)) == (C.SUCCEEDED, 1, 0)
    # The asker waited while the payer ran; then it got the intent's one answer, or — when it
    # looked while the payer's outcome was still unknown — was told to try again later.
    assert asker.events.filter(kind="call.key_in_flight").exists()
    if asker.state == C.SUPPRESSED:
        assert asker.model_result == payer.model_result
    else:
        assert (asker.state, asker.error_code) == (C.REJECTED, "IDEMPOTENCY_KEY_IN_FLIGHT")
    assert len(fault.payments.payment_requests(order)) == len(fault.payments.effects(order)) == 1
