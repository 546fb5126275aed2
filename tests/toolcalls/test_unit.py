"""The unit of work: locks in a fixed order, each changed row saved once, events in one insert
(the chain still verifies), wake-ups only after commit; leases in one place."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.factories import ModelTurnFactory, OperationFactory, ToolCallFactory
from toolcalls.actors import Actor
from toolcalls.console.models import SearchKey
from toolcalls.models import ModelTurn, Operation, ToolCall
from toolcalls.services.audit import audit_event
from toolcalls.services.audit_verify import audit_chain_verify
from toolcalls.services.unit import (
    Step,
    call_step,
    lease_clear,
    lease_expired,
    lease_free,
    lease_held,
    lease_take,
    operation_step,
)
from toolcalls.services.writes import rows_insert, rows_write
from toolcalls.states import AuditKind

pytestmark = pytest.mark.django_db
TEST = Actor.system("test")


def _statements(captured: CaptureQueriesContext, verb: str, table: str) -> list[str]:
    """The statements that ``verb`` (``UPDATE``, ``INSERT INTO``) ``table``, alone or as one of
    the parts of a step's combined write."""
    return [q["sql"] for q in captured.captured_queries if f'{verb} "{table}"' in q["sql"]]


def test_a_row_changed_twice_is_saved_once_with_the_union_of_its_fields() -> None:
    operation = OperationFactory.create()
    with operation_step(operation.pk) as step:
        assert step is not None
        step.operation.final_text = "done"
        step.change(step.operation, "final_text")
        step.operation.no_progress_turns = 2
        step.change(step.operation, "no_progress_turns", "final_text")
        with CaptureQueriesContext(connection) as captured:
            step.flush()
    [update] = _statements(captured, "UPDATE", "toolcalls_operation")
    assert '"final_text"' in update and '"no_progress_turns"' in update
    assert '"state"' not in update  # only what changed, and ``updated_at``
    operation.refresh_from_db()
    assert (operation.final_text, operation.no_progress_turns) == ("done", 2)


def test_rows_of_one_model_with_the_same_changes_share_one_update() -> None:
    first = ToolCallFactory.create()
    second = ToolCallFactory.create(turn=first.turn, position=1)
    now = timezone.now()
    with operation_step(first.operation_id) as step:
        assert step is not None
        for call in step.call_set(first.turn_id):
            call.queued_at = now
            step.change(call, "queued_at")
        with CaptureQueriesContext(connection) as captured:
            step.flush()
    assert len(_statements(captured, "UPDATE", "toolcalls_toolcall")) == 1
    assert set(ToolCall.objects.values_list("queued_at", flat=True)) == {now}
    second.refresh_from_db()
    assert second.updated_at >= now


def test_events_go_in_one_insert_and_the_chain_verifies() -> None:
    operation = OperationFactory.create()
    with operation_step(operation.pk) as step:
        assert step is not None
        for turn in range(3):
            step.audit(kind=AuditKind.RECOVERY_REQUEUED, actor=TEST, details={"turn": turn})
        with CaptureQueriesContext(connection) as captured:
            step.flush()
    assert len(_statements(captured, "INSERT INTO", "toolcalls_auditevent")) == 1
    operation.refresh_from_db()
    events = list(operation.events.order_by("seq"))
    assert [e.seq for e in events] == [1, 2, 3]
    assert [e.actor for e in events] == ["system:test"] * 3
    assert operation.audit_seq == 3 and operation.audit_head == events[-1].hash
    assert audit_chain_verify(operation_public_id=operation.public_id) == []


def test_events_and_rows_changed_alone_go_in_one_statement() -> None:
    call = ToolCallFactory.create()
    with call_step(call.pk) as step:
        step.call.error_code = "NO_PROGRESS"
        step.change(step.call, "error_code")
        step.audit(kind=AuditKind.RECOVERY_REQUEUED, actor=TEST, call=step.call)
        step.audit(kind=AuditKind.RECOVERY_REQUEUED, actor=TEST)
        events = list(step._events)
        with CaptureQueriesContext(connection) as captured:
            step.flush()
    [write] = [q["sql"] for q in captured.captured_queries]
    assert write.startswith("WITH ")
    assert 'UPDATE "toolcalls_toolcall"' in write and 'UPDATE "toolcalls_operation"' in write
    stored = list(call.operation.events.order_by("seq").values_list("pk", flat=True))
    assert [event.pk for event in events] == stored
    call.refresh_from_db()
    assert call.error_code == "NO_PROGRESS" and call.updated_at > call.created_at
    assert audit_chain_verify(operation_public_id=call.operation.public_id) == []


@pytest.mark.parametrize("vendor", ["postgresql", "other"])
def test_rows_added_with_the_events_leave_out_those_that_repeat_a_unique_row(
    vendor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation = OperationFactory.create()
    tenant = operation.tenant
    SearchKey.objects.create(tenant=tenant, operation=operation, field="order_id", value="ord-1")
    keys = [
        SearchKey(tenant=tenant, operation=operation, field="order_id", value=value)
        for value in ("ord-1", "ord-2", "ord-2")
    ]
    if vendor != "postgresql":  # the statement by statement path the embedded SQLite takes
        monkeypatch.setattr(connection, "vendor", vendor)
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        event = audit_event(operation, kind=AuditKind.RECOVERY_REQUEUED, actor=TEST)
        rows_write([event], [(operation, ["audit_seq", "audit_head"])], additions=keys)
    statements = [q["sql"] for q in captured.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == (1 if vendor == "postgresql" else 3)
    stored = SearchKey.objects.filter(operation=operation).values_list("value", flat=True)
    assert sorted(stored) == ["ord-1", "ord-2"]
    assert operation.events.get().pk == event.pk


def test_new_rows_go_in_as_bulk_create_puts_them_with_their_ids_and_defaults() -> None:
    operation = OperationFactory.create()
    keys = [
        SearchKey(tenant=operation.tenant, operation=operation, field="order_id", value=value)
        for value in ("ord-1", "ord-2")
    ]
    with CaptureQueriesContext(connection) as captured:
        rows_insert(keys)
    assert len(captured.captured_queries) == 1
    stored = SearchKey.objects.filter(operation=operation).order_by("pk")
    assert [(key.pk, key.value) for key in stored] == [(key.pk, key.value) for key in keys]
    assert all(not key._state.adding and key._state.db == "default" for key in keys)
    turn = ModelTurnFactory.build(operation=operation, index=7, response_id="resp_7")
    rows_insert([turn])  # one of a model's own: its auto_now_add time is set as save() sets it
    stored_turn = ModelTurn.objects.get(pk=turn.pk)
    assert turn.created_at is not None and stored_turn.created_at == turn.created_at
    assert stored_turn.response_id == "resp_7"


def test_a_changed_row_that_is_gone_fails_the_step() -> None:
    operation = OperationFactory.create()
    with pytest.raises(DatabaseError), operation_step(operation.pk) as step:
        assert step is not None
        gone = ToolCallFactory.create(operation=operation)
        ToolCall.objects.filter(pk=gone.pk).delete()
        gone.error_code = "NO_PROGRESS"
        step.change(gone, "error_code")
        step.audit(kind=AuditKind.RECOVERY_REQUEUED, actor=TEST)
    assert not operation.events.exists()


def test_a_new_turn_and_the_history_go_in_one_statement() -> None:
    earlier = ToolCallFactory.create(state="SUCCEEDED")
    with operation_step(earlier.operation_id) as step:
        assert step is not None
        turn = ModelTurnFactory.build(operation=step.operation, index=1)
        with CaptureQueriesContext(connection) as captured:
            step.insert_reading_history(turn)
            history = step.history()  # read with the insert, not again
    [statement] = [q["sql"] for q in captured.captured_queries]
    assert statement.startswith('WITH i AS (INSERT INTO "toolcalls_modelturn"')
    assert turn.pk == ModelTurn.objects.get(operation=earlier.operation, index=1).pk
    assert [(p.provider_call_id, p.turn_index, p.state) for p in history] == [
        (earlier.provider_call_id, earlier.turn.index, "SUCCEEDED")
    ]


def test_new_calls_go_in_with_the_steps_other_writes_under_reserved_ids() -> None:
    operation = OperationFactory.create()
    with operation_step(operation.pk) as step:
        assert step is not None
        turn = ModelTurnFactory.build(operation=step.operation, index=0)
        step.insert_reading_history(turn, calls=2)
        ids = step.reserved_call_ids(2)
        assert len(ids) == 2 and step.reserved_call_ids(1) == []  # each id is given once
        calls = [
            ToolCallFactory.build(operation=step.operation, turn=turn, position=n, pk=pk)
            for n, pk in enumerate(ids)
        ]
        step.insert(calls)
        calls[1].error_code = "NO_PROGRESS"
        step.change(calls[1], "error_code")  # part of the insert, not an UPDATE
        step.audit(kind=AuditKind.RECOVERY_REQUEUED, actor=TEST, call=calls[0])
        with CaptureQueriesContext(connection) as captured:
            step.flush()
    [write] = [q["sql"] for q in captured.captured_queries]
    assert (
        'INSERT INTO "toolcalls_toolcall"' in write and 'UPDATE "toolcalls_toolcall"' not in write
    )
    stored = dict(ToolCall.objects.filter(turn=turn).values_list("pk", "error_code"))
    assert stored == {ids[0]: "", ids[1]: "NO_PROGRESS"}
    assert operation.events.get().call_id == ids[0]
    assert audit_chain_verify(operation_public_id=operation.public_id) == []


def test_wake_ups_run_after_commit_and_never_after_a_rollback(
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    operation = OperationFactory.create()
    woken: list[str] = []
    with django_capture_on_commit_callbacks(execute=True), operation_step(operation.pk) as step:
        assert step is not None
        step.wake(lambda: woken.append("after commit"))
        assert woken == []
    assert woken == ["after commit"]
    with (
        pytest.raises(RuntimeError),
        django_capture_on_commit_callbacks(execute=True),
        operation_step(operation.pk) as step,
    ):
        assert step is not None
        step.wake(lambda: woken.append("rolled back"))
        raise RuntimeError("the step fails")
    assert woken == ["after commit"]


def test_call_step_locks_the_operation_before_the_call() -> None:
    call = ToolCallFactory.create()
    with CaptureQueriesContext(connection) as captured, call_step(call.pk) as step:
        assert step.call.pk == call.pk
        assert step.operation.pk == call.operation_id
    locks = [q["sql"] for q in captured.captured_queries if "FOR UPDATE" in q["sql"]]
    assert [("toolcalls_operation" in sql.split(" WHERE ")[0]) for sql in locks] == [True, False]
    assert "toolcalls_toolcall" in locks[1]


def test_a_held_call_stands_in_for_its_stored_row_in_the_set() -> None:
    call = ToolCallFactory.create(state="EXECUTING")
    ToolCallFactory.create(turn=call.turn, position=1)
    with call_step(call.pk) as step:
        held = step.call
        held.state = "SUCCEEDED"  # not saved yet
        rows = step.call_set(call.turn_id)
        assert held in rows and len(rows) == 2
        assert step.call_set(call.turn_id) is rows  # read once per step


def test_a_call_step_reads_the_calls_set_with_the_call() -> None:
    call = ToolCallFactory.create()
    sibling = ToolCallFactory.create(turn=call.turn, operation=call.operation, position=1)
    with CaptureQueriesContext(connection) as captured, call_step(call.pk) as step:
        rows = step.call_set(call.turn_id)
        assert [row.pk for row in rows] == [call.pk, sibling.pk] and step.call in rows
    reads = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")]
    assert len(reads) == 2  # the operation, then the set (locked)


def test_a_call_step_never_reads_the_operations_conversation() -> None:
    call = ToolCallFactory.create()
    with call_step(call.pk) as step:
        assert {"conversation", "messages", "input_text"} <= step.operation.get_deferred_fields()


def test_operation_step_is_none_when_the_row_does_not_match() -> None:
    operation = OperationFactory.create(state="COMPLETED")
    with operation_step(operation.pk, where=Q(state="PENDING")) as step:
        assert step is None


def test_a_lease_is_taken_checked_and_cleared_in_one_place() -> None:
    operation = OperationFactory.create()
    with transaction.atomic():
        step = Step(Operation.objects.select_for_update().get(pk=operation.pk))
        token = lease_take(step, step.operation)
        assert lease_held(step.operation, token) and not lease_held(step.operation, "other")
        assert not lease_held(step.operation, "")
        step.flush()
    assert not Operation.objects.filter(lease_free(timezone.now()), pk=operation.pk).exists()
    operation.refresh_from_db()
    assert operation.lease_token == token
    assert operation.lease_expires_at is not None
    later = operation.lease_expires_at + timedelta(seconds=1)
    assert lease_expired(operation, later) and not lease_expired(operation, timezone.now())
    with transaction.atomic():
        step = Step(Operation.objects.select_for_update().get(pk=operation.pk))
        lease_clear(step, step.operation)
        step.flush()
    operation.refresh_from_db()
    assert (operation.lease_token, operation.lease_expires_at) == ("", None)
    assert Operation.objects.filter(lease_free(timezone.now()), pk=operation.pk).exists()
