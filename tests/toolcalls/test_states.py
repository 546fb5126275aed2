"""Every state pair, through the one transition function: legal ones apply and are audited,
illegal ones are refused and change nothing."""

from __future__ import annotations

import itertools
from functools import partial

import pytest
from django.db import models, transaction

from approvals.models import ApprovalRequest
from approvals.states import APPROVAL_TRANSITIONS, ApprovalState
from tests.factories import ApprovalRequestFactory, OperationFactory, ToolCallFactory
from toolcalls.actors import Actor
from toolcalls.models import AuditEvent, Operation, ToolCall
from toolcalls.services.transitions import call_transition, operation_transition, row_transition
from toolcalls.services.unit import Step
from toolcalls.states import (
    CALL_TRANSITIONS,
    OPERATION_TRANSITIONS,
    AuditKind,
    CallState,
    IllegalTransition,
    OperationState,
)

pytestmark = pytest.mark.django_db
TEST = Actor.system("test")


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
        step = Step(Operation.objects.select_for_update().get(pk=operation.pk))
        if legal:
            operation_transition(step, to_state=to_state, actor=TEST, reason="r")
        else:
            with pytest.raises(IllegalTransition):
                operation_transition(step, to_state=to_state, actor=TEST)
        step.flush()
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
        step = Step(operation, [locked])
        if legal:
            call_transition(step, locked, to_state=to_state, actor=TEST)
        else:
            with pytest.raises(IllegalTransition):
                call_transition(step, locked, to_state=to_state, actor=TEST)
        step.flush()
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
        step = Step(operation)
        move = partial(
            row_transition,
            step,
            locked,
            table=APPROVAL_TRANSITIONS,
            kind="approval",
            audit_kind=AuditKind.APPROVAL_TRANSITION,
            to_state=to_state,
            actor=TEST,
        )
        if legal:
            move()
        else:
            with pytest.raises(IllegalTransition):
                move()
        step.flush()
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
        step = Step(Operation.objects.select_for_update().get(pk=operation.pk))
        operation_transition(step, to_state=OperationState.CANCELLED, actor=TEST, reason="r")
        step.flush()
    event = AuditEvent.objects.get(operation=operation)
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).update(actor="someone else")
