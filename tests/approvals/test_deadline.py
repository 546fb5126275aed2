"""The operation's deadline bounds a parked call: its approval expires no later than the
deadline, and nothing runs after it, whatever the approval says."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.services import ApprovalError, approval_decide
from approvals.states import ApprovalState
from tests.engine import bundled_replies, operator, start
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation
from toolcalls.services.approvals import call_resume
from toolcalls.states import CallState, OperationState
from toolcalls.times import rfc3339

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _parked(demo, deadline_s: float = 2) -> Operation:  # type: ignore[no-untyped-def]
    operation = start(demo, bundled_replies("refund_approve"), budgets={"deadline_s": deadline_s})
    assert operation.state == OperationState.WAITING_APPROVAL
    return operation


def test_an_approval_expires_no_later_than_the_operation_deadline(demo) -> None:
    operation = _parked(demo)
    approval = operation.approvals.get()
    assert operation.deadline_at is not None
    assert approval.expires_at == operation.deadline_at
    requested = operation.events.get(kind="approval.requested")
    assert requested.details["expires_at"] == rfc3339(operation.deadline_at)


def test_an_approval_given_after_the_deadline_expires_and_pays_nothing(demo) -> None:
    operation = _parked(demo)
    # Three seconds later by the database's clock: the 2-second deadline has passed.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE approvals_approvalrequest SET created_at = created_at - interval '3 seconds',"
            " expires_at = expires_at - interval '3 seconds'"
        )
    Operation.objects.filter(pk=operation.pk).update(
        deadline_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(ApprovalError) as exc:
        approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    assert exc.value.code == "expired"
    call = operation.calls.get(tool_name="submit_refund")
    assert (call.state, call.error_code) == (CallState.EXPIRED, "APPROVAL_EXPIRED")
    assert LedgerEntry.objects.count() == 0


def test_a_decision_after_the_deadline_is_refused_even_if_the_approval_is_still_open(
    demo,
) -> None:
    # An approval opened with a longer life than the deadline (as before the deadline bounded
    # it): the decision still checks the deadline.
    operation = _parked(demo, deadline_s=600)
    ApprovalRequest.objects.update(expires_at=timezone.now() + timedelta(hours=1))
    Operation.objects.filter(pk=operation.pk).update(
        deadline_at=timezone.now() - timedelta(seconds=1)
    )
    with pytest.raises(ApprovalError) as exc:
        approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    assert exc.value.code == "expired"
    assert operation.approvals.get().state == ApprovalState.EXPIRED
    assert LedgerEntry.objects.count() == 0


def test_an_approved_call_resumed_after_the_deadline_does_not_run(demo, monkeypatch) -> None:
    operation = _parked(demo, deadline_s=600)
    # Approve in time, but hold the resume back until the deadline has passed.
    monkeypatch.setattr("toolcalls.services.approvals.enqueue_resume", lambda *a, **k: None)
    approval_decide(approval_pk=operation.approvals.get().pk, actor=operator(), approve=True)
    Operation.objects.filter(pk=operation.pk).update(
        deadline_at=timezone.now() - timedelta(seconds=1)
    )
    call = operation.calls.get(tool_name="submit_refund")
    assert call.state == CallState.APPROVED
    call_resume(call_pk=call.pk)
    call.refresh_from_db()
    assert (call.state, call.error_code) == (CallState.REJECTED, "APPROVAL_EXPIRED")
    assert "deadline" in (call.model_result or {})["error"]["message"]
    assert LedgerEntry.objects.count() == 0
