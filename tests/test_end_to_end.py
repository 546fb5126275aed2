"""The refund scenario on PostgreSQL + Redis with a real Celery worker process.

The test process plays the web tier (starting the operation, the operator's console request);
every turn, execution and resume runs in the worker.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import wait_for
from tests.engine import bundled_replies, sent_outputs, start, transitions
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

S = OperationState
TO_APPROVAL = [
    (S.PENDING, S.MODEL_REQUESTED),
    (S.MODEL_REQUESTED, S.VALIDATING),
    (S.VALIDATING, S.EXECUTING),
    (S.EXECUTING, S.RESULTS_READY),
    (S.RESULTS_READY, S.MODEL_REQUESTED),
    (S.MODEL_REQUESTED, S.VALIDATING),
    (S.VALIDATING, S.EXECUTING),
    (S.EXECUTING, S.RESULTS_READY),
    (S.RESULTS_READY, S.MODEL_REQUESTED),
    (S.MODEL_REQUESTED, S.VALIDATING),
    (S.VALIDATING, S.WAITING_APPROVAL),
]


def _state(operation: Operation, *states: str) -> bool:
    operation.refresh_from_db()
    return operation.state in states


def _operator_client() -> Client:
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    return client


def _park(demo, name: str) -> Operation:  # type: ignore[no-untyped-def]
    operation = start(demo, bundled_replies(name))
    wait_for(lambda: _state(operation, S.WAITING_APPROVAL), what="the refund to park")
    assert transitions(operation) == TO_APPROVAL
    # Parked in the database: no lease on the operation, no call claimed or running.
    assert operation.lease_token == "" and operation.lease_expires_at is None
    assert not operation.calls.filter(state=CallState.EXECUTING).exists()
    assert LedgerEntry.objects.count() == 0
    return operation


def _results_sent_once_per_call(operation: Operation) -> None:
    for call in operation.calls.all():
        request_after = call.turn.index + 1
        assert sent_outputs(operation, request_after).count(call.provider_call_id) == 1
    for turn in operation.turns.all():
        outputs = sent_outputs(operation, turn.index)
        assert len(outputs) == len(set(outputs))


def test_refund_approved_in_the_console_is_resumed_by_the_worker(demo, celery_worker) -> None:
    operation = _park(demo, "refund_approve")
    approval = operation.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    assert _operator_client().post(url).status_code == 302
    wait_for(lambda: _state(operation, S.COMPLETED, S.FAILED), what="completion")
    assert operation.state == S.COMPLETED, operation.terminal_reason
    assert "has been submitted" in operation.final_text
    assert transitions(operation) == [
        *TO_APPROVAL,
        (S.WAITING_APPROVAL, S.EXECUTING),
        (S.EXECUTING, S.RESULTS_READY),
        (S.RESULTS_READY, S.MODEL_REQUESTED),
        (S.MODEL_REQUESTED, S.COMPLETED),
    ]
    submit = operation.calls.get(tool_name="submit_refund")
    call_path = [(e.from_state, e.to_state) for e in submit.events.filter(kind="call.transition")]
    assert call_path == [
        (CallState.PROPOSED, CallState.WAITING_APPROVAL),
        (CallState.WAITING_APPROVAL, CallState.APPROVED),
        (CallState.APPROVED, CallState.EXECUTING),
        (CallState.EXECUTING, CallState.SUCCEEDED),
    ]
    ledger = LedgerEntry.objects.get()
    assert (ledger.operation_ref, ledger.amount_cents) == (operation.public_id, 4999)
    assert ledger.idempotency_key == submit.idempotency_key
    _results_sent_once_per_call(operation)
    seqs = list(operation.events.values_list("seq", flat=True).order_by("seq"))
    assert seqs == list(range(1, len(seqs) + 1))


def test_refund_denied_is_explained_and_nothing_is_paid(demo, celery_worker) -> None:
    operation = _park(demo, "refund_deny")
    approval = operation.approvals.get()
    url = reverse("approvals:decide", args=[approval.public_id, "deny"])
    response = _operator_client().post(url, {"reason": "Send a photo of the damage first."})
    assert response.status_code == 302
    wait_for(lambda: _state(operation, S.COMPLETED, S.FAILED), what="completion")
    assert operation.state == S.COMPLETED, operation.terminal_reason
    assert "did not approve" in operation.final_text
    submit = operation.calls.get(tool_name="submit_refund")
    assert submit.state == CallState.DENIED
    assert submit.model_result == {
        "status": "error",
        "error": {
            "code": "DENIED",
            "message": "An operator denied this call; it did not run. "
            "Reason: Send a photo of the damage first.",
        },
    }
    assert LedgerEntry.objects.count() == 0
    _results_sent_once_per_call(operation)
