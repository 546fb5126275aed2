"""What changed while a refund waited for a human, checked by the worker that resumes it: a
requester who lost the right to ask, or an operation whose deadline passed, has nothing paid,
however the approval went."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from approvals.services import ApprovalError, approval_decide
from tests.engine import bundled_replies, operator, start
from tests.faults.scenarios import FaultRun, claims, received
from toolcalls.demo.models import LedgerEntry, Order
from toolcalls.models import Tenant
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def _deactivated() -> None:
    get_user_model().objects.filter(username="requester").update(is_active=False)


def _removed_from_tenant() -> None:
    requester = get_user_model().objects.get(username="requester")
    Tenant.objects.get(slug="acme").members.remove(requester)
    requester.groups.clear()


CHANGES: dict[str, Callable[[], None]] = {
    "requester_deactivated": _deactivated,
    "requester_removed_from_tenant": _removed_from_tenant,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_requester_who_lost_the_right_while_parked_has_nothing_paid(
    change: str, demo: object, fault: FaultRun
) -> None:
    fault.workers.start()
    [operation] = fault.drive([start(demo, bundled_replies("refund_approve"))])
    assert operation.state == OperationState.WAITING_APPROVAL
    CHANGES[change]()
    fault.totals.faults += 1

    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    [operation] = fault.drive([operation])

    submit = operation.calls.get(tool_name="submit_refund")
    assert (submit.state, submit.error_code, claims(submit)) == (
        CallState.REJECTED,
        "UNAUTHORIZED",
        0,
    )
    assert received(operation, submit.provider_call_id)["error"]["code"] == "UNAUTHORIZED"
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    assert LedgerEntry.objects.count() == 0
    assert Order.objects.get(order_id="ORD-1001").refunded_cents == 0


def test_an_approval_given_after_the_deadline_pays_nothing(demo: object, fault: FaultRun) -> None:
    fault.workers.start()
    # A short deadline, but long enough for the workers to park the refund first.
    started = start(demo, bundled_replies("refund_approve"), budgets={"deadline_s": 5})
    [operation] = fault.drive([started])
    assert operation.state == OperationState.WAITING_APPROVAL
    assert operation.deadline_at is not None
    assert operation.approvals.get().expires_at <= operation.deadline_at
    # The operator approves a second after the deadline, before any sweep could expire it.
    time.sleep(max((operation.deadline_at - timezone.now()).total_seconds(), 0) + 1)
    fault.totals.faults += 1

    with pytest.raises(ApprovalError) as exc:
        approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    assert exc.value.code == "expired"
    [operation] = fault.drive([operation])

    submit = operation.calls.get(tool_name="submit_refund")
    assert (submit.state, submit.error_code, claims(submit)) == (
        CallState.EXPIRED,
        "APPROVAL_EXPIRED",
        0,
    )
    assert LedgerEntry.objects.count() == 0
    assert Order.objects.get(order_id="ORD-1001").refunded_cents == 0
