"""Dispatching a reply's call set: every call stored and decided (rejected, parked or queued),
the operation settled and saved once, executions woken only after commit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import ApprovalRequest
from providers.base import ProposedCall
from tests.engine import wakeups_in
from tests.factories import ModelTurnFactory, OperationFactory, OrderFactory
from toolcalls.guards import budgets_for
from toolcalls.models import Operation
from toolcalls.services.audit_verify import audit_chain_verify
from toolcalls.services.dispatch import call_set_dispatch
from toolcalls.services.unit import operation_step
from toolcalls.states import CallState, OperationState

pytestmark = pytest.mark.django_db
Capture = Callable[..., Any]


def _proposed(call_id: str, name: str, arguments: dict[str, Any]) -> ProposedCall:
    return ProposedCall(call_id=call_id, name=name, arguments=arguments, raw_arguments=None)


def _dispatch(calls: Sequence[ProposedCall], **budgets: int) -> Operation:
    operation = OperationFactory.create(
        state=OperationState.VALIDATING, budgets=budgets_for(budgets)
    )
    OrderFactory.create(tenant_ref=operation.tenant.slug)
    turn = ModelTurnFactory.create(operation=operation, index=0)
    with operation_step(operation.pk) as step:
        assert step is not None
        call_set_dispatch(step, turn=turn, calls=calls)
    operation.refresh_from_db()
    return operation


LOOKUP = {"order_id": "ORD-1001"}
LARGE_REFUND = {"order_id": "ORD-1001", "draft_id": "RD-1", "amount_cents": 9999}


def test_each_call_is_rejected_parked_or_queued_and_the_set_parks(
    django_capture_on_commit_callbacks: Capture,
) -> None:
    with django_capture_on_commit_callbacks() as wakeups:
        operation = _dispatch(
            [
                _proposed("c_unknown", "drop_tables", {}),
                _proposed("c_lookup", "get_order", LOOKUP),
                _proposed("c_refund", "submit_refund", LARGE_REFUND),
            ]
        )
    calls = {call.provider_call_id: call for call in operation.calls.all()}
    assert calls["c_unknown"].state == CallState.REJECTED
    assert calls["c_unknown"].error_code == "UNKNOWN_TOOL"
    assert calls["c_lookup"].state == CallState.PROPOSED and calls["c_lookup"].queued_at
    assert calls["c_refund"].state == CallState.WAITING_APPROVAL
    assert operation.state == OperationState.WAITING_APPROVAL
    approval = ApprovalRequest.objects.get(call=calls["c_refund"])
    assert approval.arguments_sha256 == calls["c_refund"].arguments_sha256
    assert len(wakeups_in(wakeups)) == 1  # the lookup's execution
    kinds = [(e.kind, e.to_state) for e in operation.events.order_by("seq")]
    assert kinds == [
        ("call.proposed", "PROPOSED"),
        ("call.transition", "REJECTED"),
        ("call.proposed", "PROPOSED"),
        ("call.proposed", "PROPOSED"),
        ("call.transition", "WAITING_APPROVAL"),
        ("approval.requested", "PENDING"),
        ("operation.transition", "WAITING_APPROVAL"),
    ]
    assert audit_chain_verify(operation_public_id=operation.public_id) == []


def test_a_set_rejected_whole_is_ready_and_wakes_the_next_turn(
    django_capture_on_commit_callbacks: Capture,
) -> None:
    with django_capture_on_commit_callbacks() as wakeups:
        operation = _dispatch([_proposed("c_bad", "get_order", {"order_id": 7})])
    assert operation.state == OperationState.RESULTS_READY
    assert operation.calls.get().error_code == "INVALID_ARGUMENTS"
    assert len(wakeups_in(wakeups)) == 1
    assert operation.tool_call_count == 1 and operation.calls_per_tool == {"get_order": 1}


def test_no_more_calls_start_than_max_parallel(
    django_capture_on_commit_callbacks: Capture,
) -> None:
    with django_capture_on_commit_callbacks() as wakeups:
        operation = _dispatch(
            [
                _proposed("c_1", "get_order", LOOKUP),
                _proposed("c_2", "get_order", {"order_id": "ORD-1002"}),
            ],
            max_parallel=1,
        )
    queued = dict(operation.calls.values_list("provider_call_id", "queued_at"))
    assert queued["c_1"] is not None and queued["c_2"] is None
    assert operation.state == OperationState.EXECUTING
    assert len(wakeups_in(wakeups)) == 1


def test_the_operation_row_is_written_once_per_dispatch() -> None:
    operation = OperationFactory.create(state=OperationState.VALIDATING, budgets=budgets_for({}))
    turn = ModelTurnFactory.create(operation=operation, index=0)
    calls = [_proposed(f"c_{n}", "get_order", LOOKUP) for n in range(3)]
    with CaptureQueriesContext(connection) as captured, operation_step(operation.pk) as step:
        assert step is not None
        call_set_dispatch(step, turn=turn, calls=calls)
    sql = [q["sql"] for q in captured.captured_queries]
    assert sum('UPDATE "toolcalls_operation"' in s for s in sql) == 1
    assert sum(s.startswith('INSERT INTO "toolcalls_toolcall"') for s in sql) == 1
    # The events and the operation's one UPDATE go in one statement, after the calls' INSERT.
    [write] = [s for s in sql if 'INSERT INTO "toolcalls_auditevent"' in s]
    assert 'UPDATE "toolcalls_operation"' in write


def test_a_parked_call_and_its_approval_are_written_with_the_steps_events() -> None:
    """The set's rows take the ids the turn's insert reserved, so a parked call's approval can
    name its call before either is written: both go in the step's one write, with the events."""
    operation = OperationFactory.create(state=OperationState.VALIDATING, budgets=budgets_for({}))
    OrderFactory.create(tenant_ref=operation.tenant.slug)
    calls = [
        _proposed("c_lookup", "get_order", LOOKUP),
        _proposed("c_refund", "submit_refund", LARGE_REFUND),
    ]
    with CaptureQueriesContext(connection) as captured, operation_step(operation.pk) as step:
        assert step is not None
        turn = ModelTurnFactory.build(operation=operation, index=0)
        step.insert_reading_history(turn, calls=len(calls))
        call_set_dispatch(step, turn=turn, calls=calls)
    sql = [q["sql"] for q in captured.captured_queries]
    [write] = [s for s in sql if 'INSERT INTO "toolcalls_auditevent"' in s]
    assert 'INSERT INTO "toolcalls_toolcall"' in write
    assert 'INSERT INTO "approvals_approvalrequest"' in write
    inserts = ('INSERT INTO "toolcalls_toolcall"', 'INSERT INTO "approvals_approvalrequest"')
    assert not [s for s in sql if s.startswith(inserts)]
    approval = ApprovalRequest.objects.get(operation=operation)
    assert approval.call.provider_call_id == "c_refund"
    assert approval.call.state == CallState.WAITING_APPROVAL
    assert audit_chain_verify(operation_public_id=operation.public_id) == []
