"""Authorization before anything runs, at dispatch and again at resume: the requester is still
active and a member of the tenant, holds the permission the tool's risk class needs, and the
operation's subject may use the resource (the tool's own ``authorize`` hook)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission, User
from django.test import override_settings

from approvals.services import approval_decide
from tests import replies as r
from tests.engine import bundled_replies, change_after_the_decisions_check, operator, start
from toolcalls.demo.models import LedgerEntry, Order, RefundDraft
from toolcalls.models import Operation
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

DRAFT = {"order_id": "ORD-1001", "amount_cents": 20, "reason": "other"}


def _requester() -> User:
    return get_user_model().objects.get(username="requester")


def _deactivated() -> None:
    get_user_model().objects.filter(username="requester").update(is_active=False)


def _removed_from_tenant() -> None:
    requester = _requester()
    for tenant in requester.tenants.all():
        tenant.members.remove(requester)
    requester.groups.clear()


def _without_risk_permission() -> None:
    # Still a member and still an operator, but no longer in the group that may use tools.
    _requester().groups.remove(Group.objects.get(name="requesters"))


def _order_of_another_customer() -> None:
    Order.objects.filter(order_id="ORD-1001").update(customer_ref="cus_2002")


#: Each change of who asked (or of whose order it is) and the reason the model is told.
CHANGES: dict[str, tuple[Callable[[], None], str]] = {
    "requester_deactivated": (_deactivated, "no longer active"),
    "requester_removed_from_tenant": (_removed_from_tenant, "no longer belongs"),
    "risk_permission_missing": (_without_risk_permission, "may not use"),
    "subject_does_not_own_the_order": (_order_of_another_customer, "No order ORD-1001"),
}


def _refused(operation: Operation, tool: str, reason: str) -> None:
    call = operation.calls.get(tool_name=tool)
    assert (call.state, call.error_code) == (CallState.REJECTED, "UNAUTHORIZED")
    assert reason in (call.model_result or {})["error"]["message"]
    assert not call.events.filter(to_state=CallState.EXECUTING).exists()


@pytest.mark.parametrize("change", list(CHANGES))
def test_an_unauthorized_call_is_refused_at_dispatch_and_runs_nothing(demo, change: str) -> None:
    edit, reason = CHANGES[change]
    edit()
    operation = start(demo, [r.response(r.call("d1", "create_refund_draft", DRAFT)), r.final()])
    _refused(operation, "create_refund_draft", reason)
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    assert RefundDraft.objects.count() == 0


@pytest.mark.parametrize("change", list(CHANGES))
def test_an_approved_call_is_refused_at_resume_when_authorization_changed_while_parked(
    demo, change: str, monkeypatch
) -> None:
    edit, reason = CHANGES[change]
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.state == OperationState.WAITING_APPROVAL
    change_after_the_decisions_check(monkeypatch, edit)
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    _refused(operation, "submit_refund", reason)
    assert LedgerEntry.objects.count() == 0
    assert Order.objects.get(order_id="ORD-1001").refunded_cents == 0


def test_a_read_tool_needs_no_risk_permission(demo) -> None:
    _without_risk_permission()
    operation = start(demo, [r.response(r.call("g1", "get_order", {"order_id": "ORD-1001"}))])
    assert operation.calls.get().state == CallState.SUCCEEDED


@override_settings(CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS=100_000)
def test_the_demo_requester_may_draft_and_submit(demo) -> None:
    submit = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 20}
    operation = start(
        demo,
        [
            r.response(r.call("d1", "create_refund_draft", DRAFT)),
            r.response(r.call("s1", "submit_refund", submit)),
            r.final(),
        ],
    )
    assert {call.state for call in operation.calls.all()} == {CallState.SUCCEEDED}
    assert LedgerEntry.objects.count() == 1


@pytest.mark.parametrize("held", ["directly", "as_superuser"])
def test_a_risk_permission_held_directly_or_as_a_superuser_authorizes_the_call(
    demo, held: str
) -> None:
    _without_risk_permission()
    requester = _requester()
    if held == "directly":
        requester.user_permissions.add(Permission.objects.get(codename="use_write_tools"))
    else:
        get_user_model().objects.filter(pk=requester.pk).update(is_superuser=True)
    operation = start(demo, [r.response(r.call("d1", "create_refund_draft", DRAFT)), r.final()])
    assert operation.calls.get().state == CallState.SUCCEEDED
    assert RefundDraft.objects.count() == 1
