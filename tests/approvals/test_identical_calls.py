"""Identical approval-gated calls in one reply (same tool, same canonical arguments) are one
intent: one approval request, one decision, at most one effect. The later copies are answered at
once with a ``DUPLICATE_CALL`` envelope naming the call that carries the decision."""

from __future__ import annotations

import json
from typing import Any

import pytest

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from tests import replies as r
from tests.engine import operator, start
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

DRAFT = {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"}
SUBMIT = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}


def _twice_in_one_reply(demo: Any) -> Operation:
    # The same arguments, written differently: member order and 4999.0 have one canonical form.
    again = json.dumps(
        {"amount_cents": 4999.0, "draft_id": "RD-ORD-1001-1", "order_id": "ORD-1001"}
    )
    operation = start(
        demo,
        [
            r.response(r.call("d1", "create_refund_draft", DRAFT)),
            r.response(r.call("s1", "submit_refund", SUBMIT), r.call("s2", "submit_refund", again)),
            r.final(),
        ],
    )
    assert operation.state == OperationState.WAITING_APPROVAL
    return operation


def _duplicate(operation: Operation) -> None:
    copy = operation.calls.get(provider_call_id="s2")
    assert (copy.state, copy.error_code) == (CallState.REJECTED, "DUPLICATE_CALL")
    assert "s1" in (copy.model_result or {})["error"]["message"]


def test_identical_gated_calls_in_one_reply_open_one_approval(demo) -> None:
    operation = _twice_in_one_reply(demo)
    [approval] = ApprovalRequest.objects.filter(operation=operation)
    assert approval.call.provider_call_id == "s1"
    _duplicate(operation)


@pytest.mark.parametrize(
    ("approve", "state", "refunds"), [(True, CallState.SUCCEEDED, 1), (False, CallState.DENIED, 0)]
)
def test_one_decision_settles_identical_calls_and_pays_at_most_once(
    demo, approve: bool, state: str, refunds: int
) -> None:
    operation = _twice_in_one_reply(demo)
    approval = operation.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=approve, reason="No.")
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    assert operation.calls.get(provider_call_id="s1").state == state
    _duplicate(operation)
    assert LedgerEntry.objects.count() == refunds


def test_different_arguments_in_one_reply_are_asked_separately(demo) -> None:
    other = {**SUBMIT, "amount_cents": 4000}
    operation = start(
        demo,
        [
            r.response(r.call("d1", "create_refund_draft", DRAFT)),
            r.response(r.call("s1", "submit_refund", SUBMIT), r.call("s2", "submit_refund", other)),
            r.final(),
        ],
    )
    assert ApprovalRequest.objects.filter(operation=operation).count() == 2
