"""An approval still decidable when its operation ends (cancelled, stopped, failed) is recorded
SUPERSEDED by the engine, in the step that ends the operation: ``decided_at`` then, no one
deciding, an audit event naming how the operation ended. Deciding it is refused
(``superseded``), the expiry sweep leaves it as it is, and an operation that ends where no call
can wait for a person asks nothing of approvals. The migration records those superseded before
the state was stored."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.selectors import approvals_pending_count
from approvals.services import ApprovalError, approval_decide, approvals_expire_due
from approvals.states import ApprovalState
from tests.engine import bundled_replies, operator, start
from tests.factories import OperationFactory, pending_approval
from tests.test_metrics import TOKEN, _scrape
from toolcalls.actors import ENGINE, EXPIRY_SWEEP, Actor
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import AuditEvent, Operation
from toolcalls.services.audit_verify import audit_chain_verify
from toolcalls.services.escalations import operation_escalate, operation_stop
from toolcalls.services.operations import operation_cancel
from toolcalls.services.transitions import operation_transition
from toolcalls.services.unit import operation_step
from toolcalls.states import (
    OPERATION_MAY_WAIT,
    OPERATION_TERMINAL,
    OPERATION_TRANSITIONS,
    AuditKind,
    CallState,
    OperationState,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState
A = ApprovalState
PERSON = Actor.system("test")


@pytest.fixture
def parked(demo: Any) -> Operation:
    operation = start(demo, bundled_replies("refund_approve"))
    assert operation.state == S.WAITING_APPROVAL
    return operation


def _cancel(operation: Operation) -> None:
    operation_cancel(operation_pk=operation.pk, actor=Actor.user(operator()), reason="moot")


def _approval_events(operation: Operation) -> list[AuditEvent]:
    kind = AuditKind.APPROVAL_TRANSITION
    return list(AuditEvent.objects.filter(operation=operation, kind=kind).order_by("seq"))


def _assert_superseded(operation: Operation, ended: str) -> ApprovalRequest:
    """Its one approval recorded SUPERSEDED in the step that ended ``operation`` in ``ended``,
    with its event right after the operation's, and the chain intact."""
    approval = operation.approvals.get()
    assert (approval.state, approval.superseded) == (A.SUPERSEDED, True)
    assert approval.decided_by_id is None and approval.decision_reason == ""
    end = AuditEvent.objects.get(
        operation=operation, kind=AuditKind.OPERATION_TRANSITION, to_state=ended
    )
    [event] = _approval_events(operation)
    assert (event.from_state, event.to_state) == (A.PENDING, A.SUPERSEDED)
    assert (event.actor, event.approval_ref) == (ENGINE.audit_name, approval.public_id)
    assert event.details["operation_state"] == ended
    assert event.details["tool"] == "submit_refund"
    assert event.details["provider_call_id"] == approval.call.provider_call_id
    assert event.seq == end.seq + 1  # written by the step that ended the operation
    assert approval.decided_at is not None
    assert abs(approval.decided_at - end.created_at) < timedelta(seconds=5)
    assert audit_chain_verify(operation_public_id=operation.public_id) == []
    return approval


def test_cancelling_an_operation_supersedes_its_pending_approval(parked: Operation) -> None:
    _cancel(parked)
    approval = _assert_superseded(parked, S.CANCELLED)
    # The call stays parked as it was: nothing runs, and no result reaches the model.
    assert approval.call.state == CallState.WAITING_APPROVAL


def test_stopping_an_escalated_operation_supersedes_it_and_escalating_does_not(
    parked: Operation,
) -> None:
    with operation_step(parked.pk) as step:
        assert step is not None
        operation_escalate(step, reason="NO_PROGRESS: test", actor=ENGINE)
    # Escalated is not ended: a person may still decide the approval.
    assert parked.approvals.get().state == A.PENDING and _approval_events(parked) == []
    operation_stop(operation_pk=parked.pk, actor=PERSON, reason="enough")
    _assert_superseded(parked, S.STOPPED)


def test_failing_an_operation_supersedes_it(parked: Operation) -> None:
    with operation_step(parked.pk) as step:
        assert step is not None
        operation_transition(step, to_state=S.FAILED, actor=ENGINE, reason="BINDING: test")
    _assert_superseded(parked, S.FAILED)


def test_deciding_it_is_refused_as_superseded_and_records_nothing(parked: Operation) -> None:
    _cancel(parked)
    approval = parked.approvals.get()
    events = parked.events.count()
    for approve, reason in ((True, ""), (False, "no")):
        with pytest.raises(ApprovalError) as refused:
            approval_decide(
                approval_pk=approval.pk, actor=operator(), approve=approve, reason=reason
            )
        assert refused.value.code == "superseded"
        assert "the operation already ended (CANCELLED)" in refused.value.message
    assert parked.events.count() == events and not LedgerEntry.objects.exists()
    assert ApprovalRequest.objects.get(pk=approval.pk).state == A.SUPERSEDED


def test_the_console_refuses_deciding_it_and_the_queue_leaves_it_out(parked: Operation) -> None:
    _cancel(parked)
    approval = parked.approvals.get()
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    url = reverse("approvals:decide", args=[approval.public_id, "approve"])
    page = client.post(url, {"reason": "ok"}).content.decode()
    assert "Not recorded: Superseded: the operation already ended (CANCELLED)" in page
    assert approval.public_id not in client.get(reverse("approvals:queue")).content.decode()
    assert approvals_pending_count(user=operator()) == 0
    assert ApprovalRequest.objects.get(pk=approval.pk).state == A.SUPERSEDED


def test_an_approval_that_expired_first_is_left_for_the_sweep_to_record_expired(
    parked: Operation,
) -> None:
    """The operation's deadline passed (an approval never outlives it) before it was cancelled:
    the approval expired first, so it is not superseded; the sweep records it EXPIRED."""
    Operation.objects.filter(pk=parked.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    _cancel(parked)
    approval = ApprovalRequest.objects.get(operation=parked)  # read with its operation now
    assert approval.state == A.PENDING and approval.shown_state == A.EXPIRED
    assert _approval_events(parked) == []
    assert approvals_expire_due() == 1
    [event] = _approval_events(parked)
    assert (event.to_state, event.actor) == (A.EXPIRED, EXPIRY_SWEEP.audit_name)
    assert audit_chain_verify(operation_public_id=parked.public_id) == []


def test_the_sweep_leaves_a_superseded_approval_superseded_past_its_expiry(
    parked: Operation,
) -> None:
    _cancel(parked)
    decided_at = parked.approvals.get().decided_at
    with connection.cursor() as cursor:
        cursor.execute("UPDATE approvals_approvalrequest SET expires_at = now() - interval '1 s'")
    assert approvals_expire_due() == 0
    approval = parked.approvals.get()
    assert (approval.state, approval.decided_at) == (A.SUPERSEDED, decided_at)
    assert approval.call.state == CallState.WAITING_APPROVAL
    assert len(_approval_events(parked)) == 1


_ENDINGS = [
    (source, target)
    for source, targets in OPERATION_TRANSITIONS.items()
    for target in sorted(targets)
    if target in OPERATION_TERMINAL
]


@pytest.mark.parametrize(("source", "target"), _ENDINGS)
def test_only_an_ending_where_a_call_may_wait_asks_for_its_approvals(
    source: str, target: str
) -> None:
    """COMPLETED, REFUSED and INCOMPLETE (always from MODEL_REQUESTED), and any end from
    PENDING, MODEL_REQUESTED or RESULTS_READY, run no statement more: no call can wait for a
    person there. From the others, one: the approvals locked."""
    operation = OperationFactory.create(state=source)
    with operation_step(operation.pk) as step:
        assert step is not None
        with CaptureQueriesContext(connection) as captured:
            operation_transition(step, to_state=target, actor=ENGINE, reason="test")
    statements = [query["sql"] for query in captured.captured_queries]
    if source in OPERATION_MAY_WAIT:
        [lock] = statements
        assert '"approvals_approvalrequest"' in lock and "FOR UPDATE" in lock
    else:
        assert statements == []
    assert target != S.COMPLETED or source not in OPERATION_MAY_WAIT


def test_a_completed_refund_had_no_approval_left_pending(parked: Operation) -> None:
    approval_decide(approval_pk=parked.approvals.get().pk, actor=operator(), approve=True)
    parked.refresh_from_db()
    assert parked.state == S.COMPLETED
    assert parked.approvals.get().state == A.APPROVED
    assert [e.to_state for e in _approval_events(parked)] == [A.APPROVED]


@override_settings(CALLGATE_METRICS_TOKEN=TOKEN)
def test_metrics_count_it_as_a_decision_and_no_longer_pending(parked: Operation) -> None:
    assert 'callgate_approvals_pending{tool="submit_refund"} 1.0' in _scrape()[1]
    _cancel(parked)
    text = _scrape()[1]
    assert 'callgate_approvals_pending{tool="submit_refund"}' not in text
    assert 'callgate_approval_wait_seconds_count{decision="superseded"}' in text


BEFORE = [("approvals", "0005_foreign_keys_indexed_by_composites")]
AFTER = [("approvals", "0006_superseded_state")]


def test_the_migration_records_the_approvals_superseded_before_it(demo: Any) -> None:
    cancelled = start(demo, bundled_replies("refund_approve"))
    _cancel(cancelled)
    expired_first = start(demo, bundled_replies("refund_approve"))
    ApprovalRequest.objects.filter(operation=expired_first).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    _cancel(expired_first)
    unrecorded_end = pending_approval(demo.tenant)  # its operation ends without an event
    Operation.objects.filter(pk=unrecorded_end.operation_id).update(state=S.FAILED)
    waiting = start(demo, bundled_replies("refund_approve"))
    events = AuditEvent.objects.count()

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    # As the code before stored them: PENDING, no decision time, whatever their operation.
    old = executor.loader.project_state(BEFORE).apps.get_model("approvals", "ApprovalRequest")
    assert set(old.objects.values_list("state", "decided_at")) == {(A.PENDING, None)}
    MigrationExecutor(connection).migrate(AFTER)

    superseded = cancelled.approvals.get()
    end = cancelled.events.get(kind=AuditKind.OPERATION_TRANSITION, to_state=S.CANCELLED)
    assert (superseded.state, superseded.decided_at) == (A.SUPERSEDED, end.created_at)
    assert superseded.decided_by_id is None
    unrecorded_end.refresh_from_db()
    ended_at = Operation.objects.get(pk=unrecorded_end.operation_id).updated_at
    assert (unrecorded_end.state, unrecorded_end.decided_at) == (A.SUPERSEDED, ended_at)
    assert expired_first.approvals.get().state == A.PENDING  # the sweep records it EXPIRED
    assert waiting.approvals.get().state == A.PENDING
    # No event written: every chain is as it was and verifies.
    assert AuditEvent.objects.count() == events
    assert audit_chain_verify() == []
