"""Every failure branch ends in a named state, with a real worker on PostgreSQL and Redis.

Each test asserts the final or recovery state, the envelope the model received, the audit
events and the ledger.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from approvals.services import approval_decide, approvals_expire_due
from tests import replies as r
from tests.conftest import wait_for
from tests.engine import bundled_replies, start
from toolcalls.actors import Actor
from toolcalls.demo.models import Fault, LedgerEntry
from toolcalls.models import Operation, ToolCall
from toolcalls.states import OPERATION_TERMINAL, CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

S = OperationState
ORDER = {"order_id": "ORD-1001"}
DRAFT = {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"}
SUBMIT = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}
SETTLED = (*OPERATION_TERMINAL, S.ESCALATED, S.WAITING_APPROVAL)


def settle(operation: Operation) -> Operation:
    """Wait until the operation is terminal, escalated, or parked with nothing running."""

    def quiet() -> bool:
        operation.refresh_from_db()
        busy = operation.calls.filter(
            state__in=[CallState.PROPOSED, CallState.APPROVED, CallState.EXECUTING]
        ).exists()
        return operation.state in SETTLED and not busy and not operation.lease_token

    wait_for(quiet, what=f"{operation.public_id} to settle")
    return operation


def received(operation: Operation, call_id: str) -> dict[str, Any]:
    """The envelope the model received for ``call_id`` (from the request that carried it)."""
    for turn in operation.turns.order_by("index"):
        for item in turn.request_body.get("input", []):
            if item.get("type") == "function_call_output" and item.get("call_id") == call_id:
                return json.loads(item["output"])
    raise AssertionError(f"{call_id} was never answered")


def call_path(call: ToolCall) -> list[tuple[str, str]]:
    return [(e.from_state, e.to_state) for e in call.events.filter(kind="call.transition")]


def approve_all(operation: Operation) -> None:
    operator = get_user_model().objects.get(username="operator")
    for approval in operation.approvals.filter(state="PENDING"):
        approval_decide(approval_pk=approval.pk, actor=operator, approve=True)


def test_max_tokens_mid_answer_is_incomplete(demo, celery_worker) -> None:
    cut = r.response(r.message("Here is how refunds work: you can"), status="incomplete")
    cut["body"]["incomplete_details"] = {"reason": "max_output_tokens"}
    operation = settle(start(demo, [cut]))
    assert operation.state == S.INCOMPLETE
    assert operation.terminal_reason.startswith("TRUNCATED")
    assert operation.calls.count() == 0 and LedgerEntry.objects.count() == 0


def test_max_tokens_mid_call_runs_nothing(demo, celery_worker) -> None:
    operation = settle(start(demo, bundled_replies("max_tokens")))
    assert operation.state == S.INCOMPLETE
    assert list(operation.calls.values_list("tool_name", flat=True)) == ["get_order"]
    assert operation.events.filter(to_state=S.INCOMPLETE).count() == 1
    assert LedgerEntry.objects.count() == 0


def test_unknown_tool_gets_an_envelope_and_the_loop_goes_on(demo, celery_worker) -> None:
    operation = settle(start(demo, bundled_replies("unknown_tool")))
    assert operation.state == S.COMPLETED
    call = operation.calls.get()
    assert received(operation, call.provider_call_id)["error"]["code"] == "UNKNOWN_TOOL"
    assert call_path(call) == [(CallState.PROPOSED, CallState.REJECTED)]


def test_invalid_arguments_get_an_envelope(demo, celery_worker) -> None:
    bad = r.call("bad", "create_refund_draft", {**DRAFT, "amount_cents": "4999"})
    operation = settle(start(demo, [r.response(bad), r.final()]))
    assert operation.state == S.COMPLETED
    envelope = received(operation, "bad")
    assert envelope["error"]["code"] == "INVALID_ARGUMENTS"
    assert "amount_cents" in envelope["error"]["message"]
    assert LedgerEntry.objects.count() == 0


def test_expired_approval_is_told_and_never_executed(demo, celery_worker) -> None:
    operation = settle(start(demo, bundled_replies("refund_approve")))
    assert operation.state == S.WAITING_APPROVAL
    with connection.cursor() as cursor:
        cursor.execute("UPDATE approvals_approvalrequest SET expires_at = now()")
    assert approvals_expire_due() == 1
    operation = settle(operation)
    submit = operation.calls.get(tool_name="submit_refund")
    assert received(operation, submit.provider_call_id)["error"]["code"] == "APPROVAL_EXPIRED"
    assert (CallState.APPROVED, CallState.EXECUTING) not in call_path(submit)
    assert call_path(submit)[-1] == (CallState.WAITING_APPROVAL, CallState.EXPIRED)
    assert "did not go through" in operation.final_text  # the scripted model's error branch
    assert LedgerEntry.objects.count() == 0


def test_submit_timeout_after_the_effect_is_reconciled(demo, celery_worker) -> None:
    # The refund is paid, then the handler outlives its 2000 ms timeout: the answer is lost.
    Fault.objects.create(point="submit_refund.after_effect", delay_ms=3000, times=1)
    operation = settle(start(demo, bundled_replies("refund_approve")))
    approve_all(operation)
    operation = settle(operation)
    assert operation.state == S.COMPLETED, operation.terminal_reason
    submit = operation.calls.get(tool_name="submit_refund")
    assert call_path(submit)[-2:] == [
        (CallState.EXECUTING, CallState.UNKNOWN_OUTCOME),
        (CallState.UNKNOWN_OUTCOME, CallState.SUCCEEDED),
    ]
    assert received(operation, submit.provider_call_id)["data"]["refund_id"] == "RF-RD-ORD-1001-1"
    assert LedgerEntry.objects.count() == 1


def test_the_same_refund_under_a_new_call_id_is_suppressed(demo, celery_worker) -> None:
    replies = [
        r.response(r.call("d1", "create_refund_draft", DRAFT)),
        r.response(r.call("s1", "submit_refund", SUBMIT)),
        r.response(r.call("g1", "get_order", ORDER)),  # new information in between
        r.response(r.call("s2", "submit_refund", SUBMIT)),
        r.final(),
    ]
    operation = start(demo, replies)
    while settle(operation).state == S.WAITING_APPROVAL:
        approve_all(operation)
    assert operation.state == S.COMPLETED, operation.terminal_reason
    first, again = (
        operation.calls.get(provider_call_id="s1"),
        operation.calls.get(provider_call_id="s2"),
    )
    assert (first.state, again.state) == (CallState.SUCCEEDED, CallState.SUPPRESSED)
    assert received(operation, "s2") == received(operation, "s1")
    assert LedgerEntry.objects.count() == 1


def test_an_identical_call_repeated_gets_no_progress_then_escalates(demo, celery_worker) -> None:
    replies = [r.response(r.call(f"g{i}", "get_order", ORDER)) for i in range(3)] + [r.final()]
    operation = settle(start(demo, replies))
    states = {c.provider_call_id: (c.state, c.error_code) for c in operation.calls.all()}
    assert states == {
        "g0": (CallState.SUCCEEDED, ""),
        "g1": (CallState.REJECTED, "NO_PROGRESS"),
        "g2": (CallState.REJECTED, "NO_PROGRESS"),
    }
    assert received(operation, "g1")["error"]["code"] == "NO_PROGRESS"
    assert operation.state == S.ESCALATED
    assert operation.terminal_reason.startswith("NO_PROGRESS")


def test_refusal_is_refused(demo, celery_worker) -> None:
    operation = settle(start(demo, bundled_replies("refusal")))
    assert operation.state == S.REFUSED and operation.calls.count() == 0


BUDGETS = {
    # guard: (overrides, the reply sequence that trips it)
    "max_turns": ({"max_turns": 2}, "lookups"),
    "max_tool_calls": ({"max_tool_calls": 2}, "lookups"),
    "max_calls_per_tool": ({"max_calls_per_tool": 1}, "lookups"),
    "max_input_tokens": ({"max_input_tokens": 150}, "lookups"),
    "max_output_tokens": ({"max_output_tokens": 30}, "lookups"),
    "max_cost_usd": ({"max_cost_usd": 0.0002}, "lookups"),
    "max_no_progress_turns": ({"max_no_progress_turns": 1}, "repeats"),
    "deadline_s": ({"deadline_s": 1}, "slow"),
}
MORE = {
    "max_turns": 100,
    "max_tool_calls": 100,
    "max_calls_per_tool": 100,
    "max_input_tokens": 100_000,
    "max_output_tokens": 100_000,
    "max_cost_usd": 1.0,
    "max_no_progress_turns": 20,
    "deadline_s": 3600,
}
CODES = {
    "max_turns": "MAX_TURNS",
    "max_tool_calls": "MAX_TOOL_CALLS",
    "max_calls_per_tool": "MAX_CALLS_PER_TOOL",
    "max_input_tokens": "MAX_INPUT_TOKENS",
    "max_output_tokens": "MAX_OUTPUT_TOKENS",
    "max_cost_usd": "MAX_COST",
    "max_no_progress_turns": "NO_PROGRESS",
    "deadline_s": "DEADLINE",
}


def _budget_replies(kind: str) -> list[dict[str, Any]]:
    orders = ["ORD-1001", "ORD-1002", "ORD-1003"]
    if kind == "repeats":  # different calls whose results carry nothing new
        calls = [r.call(f"g{i}", "get_order", {"order_id": "ORD-9999"}) for i in range(3)]
        calls[1] = r.call("g1", "get_order", {"order_id": "ORD-9998"})
    else:
        calls = [r.call(f"g{i}", "get_order", {"order_id": o}) for i, o in enumerate(orders)]
    replies = [r.response(call) for call in calls] + [r.final()]
    if kind == "slow":  # a retryable failure with a delay outlives a one-second deadline
        replies.insert(1, r.http_error(503, "server_error", retry_after="2"))
    return replies


@pytest.mark.parametrize("decision", ["extend", "stop"])
@pytest.mark.parametrize("guard", sorted(BUDGETS))
def test_each_budget_escalates_then_extends_or_stops(guard, decision, demo, celery_worker) -> None:  # type: ignore[no-untyped-def]
    from toolcalls.services.escalations import operation_extend, operation_stop

    overrides, kind = BUDGETS[guard]
    operation = settle(start(demo, _budget_replies(kind), budgets=overrides))
    assert operation.state == S.ESCALATED
    assert operation.terminal_reason.startswith(CODES[guard]), operation.terminal_reason
    event = operation.events.filter(to_state=S.ESCALATED).get()
    assert event.details["reason"] == operation.terminal_reason
    if decision == "stop":
        operation_stop(operation_pk=operation.pk, actor=Actor.system("test"), reason="enough")
        operation.refresh_from_db()
        assert operation.state == S.STOPPED
        return
    operation_extend(
        operation_pk=operation.pk, actor=Actor.system("test"), budgets={guard: MORE[guard]}
    )
    operation = settle(operation)
    assert operation.state == S.COMPLETED, operation.terminal_reason


def test_a_parallel_set_runs_siblings_once_and_returns_results_together(
    demo, celery_worker
) -> None:
    draft = r.call("d1", "create_refund_draft", DRAFT)
    first = r.response(r.call("g1", "get_order", ORDER), draft)
    replies = [
        first,
        r.response(
            r.call("g2", "get_order", {"order_id": "ORD-1002"}),
            r.call("s1", "submit_refund", SUBMIT),
            r.call("g3", "get_order", {"order_id": "ORD-1003"}),
        ),
        r.final(),
    ]
    operation = settle(start(demo, replies))
    assert operation.state == S.WAITING_APPROVAL
    assert {c.provider_call_id: c.state for c in operation.turns.get(index=1).calls.all()} == {
        "g2": CallState.SUCCEEDED,
        "s1": CallState.WAITING_APPROVAL,
        "g3": CallState.SUCCEEDED,
    }
    assert operation.turn_count == 2  # nothing went back to the model while s1 waits
    approve_all(operation)
    operation = settle(operation)
    assert operation.state == S.COMPLETED
    for call in operation.turns.get(index=1).calls.all():
        assert [p for p in call_path(call) if p[1] == CallState.EXECUTING] == [
            (
                CallState.APPROVED if call.provider_call_id == "s1" else CallState.PROPOSED,
                CallState.EXECUTING,
            )
        ]
    last = operation.turns.get(index=2).request_body["input"]
    outputs = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
    assert sorted(outputs[-3:]) == ["g2", "g3", "s1"]  # all three in the one request
    assert LedgerEntry.objects.count() == 1


def test_parallelism_is_bounded(demo, celery_worker) -> None:
    calls = [r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"}) for i in (1, 2, 3)]
    operation = settle(start(demo, [r.response(*calls), r.final()], budgets={"max_parallel": 1}))
    assert operation.state == S.COMPLETED
    events = list(operation.events.filter(kind="call.transition").order_by("seq"))
    running = 0
    for event in events:
        running += (event.to_state == CallState.EXECUTING) - (
            event.from_state == CallState.EXECUTING
        )
        assert running <= 1


def test_a_tampered_stored_result_fails_the_operation(demo, celery_worker) -> None:
    replies = [
        r.response(r.call("g1", "get_order", ORDER), r.call("d1", "create_refund_draft", DRAFT)),
        r.response(
            r.call("s1", "submit_refund", SUBMIT),
            r.call("g2", "get_order", {"order_id": "ORD-1002"}),
        ),
        r.final(),
    ]
    operation = settle(start(demo, replies))
    assert operation.state == S.WAITING_APPROVAL
    sibling = operation.calls.get(provider_call_id="g2")
    forged = {"status": "ok", "data": {"order_id": "ORD-1002", "refundable_cents": 999999}}
    ToolCall.objects.filter(pk=sibling.pk).update(model_result=forged)
    approve_all(operation)
    operation = settle(operation)
    assert operation.state == S.FAILED
    assert operation.terminal_reason.startswith("BINDING_MISMATCH")
    failed = operation.events.get(to_state=S.FAILED)
    assert failed.details["call"] == sibling.public_id
    assert operation.turn_count == 2  # the forged result never reached the model
