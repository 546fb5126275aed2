"""The order changes while its refund waits for a human, just after the decision's own check of
the tool's precondition: the approval goes through, but the resume revalidates against the shop
as it is now and nothing is paid. (A change before that check refuses the approval itself:
tests/approvals/test_decide.py.)"""

from __future__ import annotations

import pytest
from django.db.models import F

from approvals.services import approval_decide
from tests.engine import bundled_replies, change_after_the_decisions_check, operator, start
from tests.faults.scenarios import FaultRun, claims, received
from toolcalls.demo.models import LedgerEntry, Order, RefundDraft
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

ORDER = "ORD-1001"  # the bundled scenario refunds 4999 cents of it under draft RD-ORD-1001-1


def _already_refunded() -> None:  # refunded in full elsewhere meanwhile
    Order.objects.filter(order_id=ORDER).update(refunded_cents=F("total_cents"))


def _total_lowered() -> None:  # the order was corrected to less than the refund
    Order.objects.filter(order_id=ORDER).update(total_cents=3000)


def _draft_lowered() -> None:  # the draft now covers less than the approved amount
    RefundDraft.objects.filter(order__order_id=ORDER).update(amount_cents=2000)


CHANGES = {
    "already_refunded": (_already_refunded, "REFUND_EXCEEDS_REMAINING"),
    "total_lowered": (_total_lowered, "REFUND_EXCEEDS_REMAINING"),
    "draft_lowered": (_draft_lowered, "DRAFT_MISMATCH"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_an_order_changed_while_pending_blocks_the_approved_refund(
    change: str, demo: object, fault: FaultRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit, code = CHANGES[change]
    fault.workers.start()
    [operation] = fault.drive([start(demo, bundled_replies("refund_approve"))])
    assert operation.state == OperationState.WAITING_APPROVAL
    change_after_the_decisions_check(monkeypatch, edit)
    fault.totals.faults += 1

    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    changed = Order.objects.values("total_cents", "refunded_cents").get(order_id=ORDER)
    [operation] = fault.drive([operation])

    submit = operation.calls.get(tool_name="submit_refund")
    assert (submit.state, submit.error_code, claims(submit)) == (CallState.REJECTED, code, 0)
    assert received(operation, submit.provider_call_id)["error"]["code"] == code
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    assert LedgerEntry.objects.count() == 0
    assert Order.objects.values("total_cents", "refunded_cents").get(order_id=ORDER) == changed
