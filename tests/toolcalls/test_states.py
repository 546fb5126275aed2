"""Every state pair, through the one transition function: legal ones apply and are audited,
illegal ones are refused and change nothing."""

from __future__ import annotations

import itertools
from functools import partial

import pytest
from django.db import models, transaction

from approvals.models import ApprovalRequest
from tests.factories import ApprovalRequestFactory, OperationFactory, ToolCallFactory
from toolcalls.models import AuditEvent, Operation, ToolCall
from toolcalls.services.transitions import call_transition, operation_transition, row_transition
from toolcalls.states import (
    APPROVAL_TRANSITIONS,
    CALL_TRANSITIONS,
    OPERATION_TRANSITIONS,
    ApprovalState,
    CallState,
    IllegalTransition,
    OperationState,
)

pytestmark = pytest.mark.django_db


def _pairs(enum: type[models.TextChoices]) -> list[tuple[str, str]]:
    return list(itertools.product(enum.values, enum.values))


def test_tables_cover_every_state() -> None:
    assert set(OPERATION_TRANSITIONS) == set(OperationState.values)
    assert set(CALL_TRANSITIONS) == set(CallState.values)
    assert set(APPROVAL_TRANSITIONS) == set(ApprovalState.values)


@pytest.mark.parametrize(("from_state", "to_state"), _pairs(OperationState))
def test_operation_transition(from_state: str, to_state: str) -> None:
    operation = OperationFactory.create(state=from_state)
    legal = to_state in OPERATION_TRANSITIONS[from_state]
    with transaction.atomic():
        locked = Operation.objects.select_for_update().get(pk=operation.pk)
        if legal:
            operation_transition(operation=locked, to_state=to_state, actor="test", reason="r")
        else:
            with pytest.raises(IllegalTransition):
                operation_transition(operation=locked, to_state=to_state, actor="test")
    operation.refresh_from_db()
    assert operation.state == (to_state if legal else from_state)
    events = AuditEvent.objects.filter(operation=operation, kind="operation.transition")
    assert [(e.from_state, e.to_state) for e in events] == (
        [(from_state, to_state)] if legal else []
    )


@pytest.mark.parametrize(("from_state", "to_state"), _pairs(CallState))
def test_call_transition(from_state: str, to_state: str) -> None:
    call = ToolCallFactory.create(state=from_state)
    legal = to_state in CALL_TRANSITIONS[from_state]
    with transaction.atomic():
        operation = Operation.objects.select_for_update().get(pk=call.operation_id)
        locked = ToolCall.objects.select_for_update().get(pk=call.pk)
        if legal:
            call_transition(operation=operation, call=locked, to_state=to_state, actor="test")
        else:
            with pytest.raises(IllegalTransition):
                call_transition(operation=operation, call=locked, to_state=to_state, actor="test")
    call.refresh_from_db()
    assert call.state == (to_state if legal else from_state)
    assert AuditEvent.objects.filter(call=call).count() == (1 if legal else 0)


@pytest.mark.parametrize(("from_state", "to_state"), _pairs(ApprovalState))
def test_approval_transition(from_state: str, to_state: str) -> None:
    approval = ApprovalRequestFactory.create(state=ApprovalState.PENDING)
    ApprovalRequest.objects.filter(pk=approval.pk).update(
        state=from_state, decided_at=approval.created_at
    )
    legal = to_state in APPROVAL_TRANSITIONS[from_state]
    with transaction.atomic():
        operation = Operation.objects.select_for_update().get(pk=approval.operation_id)
        locked = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
        move = partial(
            row_transition,
            operation=operation,
            row=locked,
            table=APPROVAL_TRANSITIONS,
            kind="approval",
            to_state=to_state,
            actor="test",
        )
        if legal:
            move()
        else:
            with pytest.raises(IllegalTransition):
                move()
    approval.refresh_from_db()
    assert approval.state == (to_state if legal else from_state)


def test_database_refuses_unknown_states() -> None:
    from django.db import IntegrityError

    operation = OperationFactory.create()
    with pytest.raises(IntegrityError), transaction.atomic():
        Operation.objects.filter(pk=operation.pk).update(state="DONE")


def test_audit_events_refuse_deletion_and_update() -> None:
    operation = OperationFactory.create()
    with transaction.atomic():
        locked = Operation.objects.select_for_update().get(pk=operation.pk)
        operation_transition(
            operation=locked, to_state=OperationState.CANCELLED, actor="t", reason="r"
        )
    event = AuditEvent.objects.get(operation=operation)
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).update(actor="someone else")
