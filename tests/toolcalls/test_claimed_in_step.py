"""A worker that continues with the work a step hands it has the step claim that work in its
own transaction (``enqueue.WakeUp.claim``): the turn that proposes a call claims the call, the
call that makes a set's results ready claims the next turn. Outside a worker's continuation,
every step claims its own work."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests import replies as r
from tests.engine import start
from toolcalls import tasks
from toolcalls.console.models import SearchKey
from toolcalls.models import AuditEvent, IdempotencyRecord, Operation
from toolcalls.services import turns
from toolcalls.services.enqueue import continuing
from toolcalls.states import CallState, OperationState

pytestmark = pytest.mark.django_db(transaction=True)

S = OperationState
LOOKUP = r.call("call_lookup", "get_order", {"order_id": "ORD-1001"})
DRAFT = r.call(
    "call_draft",
    "create_refund_draft",
    {"order_id": "ORD-1002", "amount_cents": 1000, "reason": "damaged_item"},
)


def _held(demo: Any, replies: list[dict[str, Any]], **overrides: Any) -> Operation:
    """An operation started with no wake-up sent (nothing runs yet)."""
    sent: list[int] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tasks.run_turn, "apply_async", lambda args, **kw: sent.append(args[0]))
        operation = start(demo, replies, **overrides)
    assert sent == [operation.pk]
    return operation


def _as_a_worker(operation: Operation) -> list[str]:
    """Run ``operation`` as a worker that took its wake-up from the queue; the SQL it ran."""
    with CaptureQueriesContext(connection) as captured, continuing():
        turns.turn_run(operation_pk=operation.pk)
    return [query["sql"] for query in captured.captured_queries]


def _sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    sent: list[tuple[str, int]] = []
    for task in (tasks.run_turn, tasks.execute_call):
        monkeypatch.setattr(
            task, "apply_async", lambda args, _name=task.name, **kw: sent.append((_name, args[0]))
        )
    return sent


def _transactions(sql: list[str]) -> list[str]:
    """The statements of each transaction in ``sql``, joined."""
    return [" ".join(part.split("COMMIT")[0].split()) for part in " ".join(sql).split("BEGIN")[1:]]


def test_a_turn_without_calls_is_written_with_the_steps_events(demo: Any) -> None:
    """Nothing in the step needs the final turn's id: its row goes in the step's one write."""
    operation = _held(demo, [r.final()])
    sql = _as_a_worker(operation)

    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    [write] = [s for s in sql if 'INSERT INTO "toolcalls_modelturn"' in s]
    assert 'INSERT INTO "toolcalls_auditevent"' in write and "'COMPLETED'" in write
    assert operation.turns.get().text == operation.final_text


def test_a_turn_claims_its_call_and_the_call_claims_the_next_turn(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation = _held(demo, [r.response(LOOKUP), r.final()])
    sent = _sent(monkeypatch)
    sql = _as_a_worker(operation)

    operation.refresh_from_db()
    assert operation.state == S.COMPLETED and sent == []
    # Four transactions: claim turn 1; record it and claim the call; record the call and claim
    # turn 2; record turn 2. Each step claiming its own work took six.
    claim, record_and_claim_call, result_and_claim_turn, record = _transactions(sql)
    assert "'MODEL_REQUESTED'" in claim and "'COMPLETED'" in record
    assert 'INSERT INTO "toolcalls_modelturn"' in record_and_claim_call
    assert "'EXECUTING'" in record_and_claim_call.split('INSERT INTO "toolcalls_toolcall"')[1]
    assert "'SUCCEEDED'" in result_and_claim_turn and "'MODEL_REQUESTED'" in result_and_claim_turn
    call = operation.calls.get()
    assert call.state == CallState.SUCCEEDED and call.attempt == 1
    # The second request carries the call's result, read from the rows the step held.
    [output] = [i for i in operation.turns.get(index=1).request_body["input"] if "output" in i]
    assert output["call_id"] == "call_lookup" and "ORD-1001" in output["output"]
    transitions = [
        (e.from_state, e.to_state) for e in operation.events.order_by("seq") if e.to_state
    ]
    assert transitions == [
        ("", S.PENDING),
        (S.PENDING, S.MODEL_REQUESTED),
        (S.MODEL_REQUESTED, S.VALIDATING),
        ("", CallState.PROPOSED),
        (S.VALIDATING, S.EXECUTING),
        (CallState.PROPOSED, CallState.EXECUTING),
        (CallState.EXECUTING, CallState.SUCCEEDED),
        (S.EXECUTING, S.RESULTS_READY),
        (S.RESULTS_READY, S.MODEL_REQUESTED),
        (S.MODEL_REQUESTED, S.COMPLETED),
    ]
    assert AuditEvent.objects.filter(operation=operation).count() == operation.audit_seq


def test_the_call_that_claims_the_next_turn_reads_all_it_needs_with_its_locks(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation = _held(demo, [r.response(LOOKUP), r.final()])
    _sent(monkeypatch)
    sql = _as_a_worker(operation)
    begins = [number for number, statement in enumerate(sql) if statement == "BEGIN"]
    commit = sql.index("COMMIT", begins[2])
    # Three statements: the operation locked, with its conversation, its replay script and
    # the result digests of its earlier calls (for the progress count); the call set locked;
    # one write, the console's search keys of the order looked up with it.
    lock_operation, lock_set, write = sql[begins[2] + 1 : commit]
    assert lock_operation.startswith("SELECT") and "FOR UPDATE" in lock_operation
    assert '"conversation"' in lock_operation and '"toolcalls_replayscript"' in lock_operation
    assert '"result_sha256"' in lock_operation
    assert lock_set.startswith('SELECT "toolcalls_toolcall"') and "FOR UPDATE" in lock_set
    assert write.startswith("WITH") and "'MODEL_REQUESTED'" in write
    assert 'INSERT INTO "console_searchkey"' in write and "ON CONFLICT DO NOTHING" in write
    keys = SearchKey.objects.filter(operation=operation).values_list("field", "value")
    assert set(keys) == {("customer", "cus_1001"), ("order_id", "ord-1001")}


def test_a_call_with_an_idempotency_key_reserves_it_in_the_turn_that_claims_it(
    demo: Any,
) -> None:
    operation = _held(demo, [r.response(DRAFT), r.final()])
    _as_a_worker(operation)

    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    call = operation.calls.get()
    record = IdempotencyRecord.objects.get(call=call)
    assert record.state == IdempotencyRecord.State.DONE and call.state == CallState.SUCCEEDED


def test_of_parallel_calls_this_worker_claims_the_first_and_the_broker_gets_the_others(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = r.call("call_second", "get_order", {"order_id": "ORD-1002"})
    operation = _held(demo, [r.response(LOOKUP, second), r.final()], budgets={"max_parallel": 2})
    sent = _sent(monkeypatch)
    _as_a_worker(operation)

    operation.refresh_from_db()
    first, other = operation.calls.order_by("position")
    assert first.state == CallState.SUCCEEDED
    assert other.state == CallState.PROPOSED and other.queued_at is not None
    assert sent == [(tasks.execute_call.name, other.pk)]
    assert operation.state == S.EXECUTING  # the second call's worker finishes the set


def test_a_set_rejected_whole_claims_the_next_turn_with_the_rows_it_has_not_written(
    demo: Any,
) -> None:
    bad = r.call("call_bad", "get_order", {"order_id": 7})
    operation = _held(demo, [r.response(bad), r.final()])
    sql = _as_a_worker(operation)

    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    assert len(_transactions(sql)) == 3  # claim turn 1; record it and claim turn 2; record
    assert operation.calls.get().error_code == "INVALID_ARGUMENTS"
    [output] = [i for i in operation.turns.get(index=1).request_body["input"] if "output" in i]
    assert "INVALID_ARGUMENTS" in output["output"]


def test_outside_a_worker_s_continuation_each_step_claims_its_own_work(
    demo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    operation = _held(demo, [r.response(LOOKUP), r.final()])
    sent = _sent(monkeypatch)
    turns.turn_run(operation_pk=operation.pk)

    operation.refresh_from_db()
    call = operation.calls.get()
    assert operation.state == S.EXECUTING
    assert call.state == CallState.PROPOSED and call.queued_at is not None
    assert sent == [(tasks.execute_call.name, call.pk)]
