"""Guard mechanics, retries, result limits and human resolution, run in-process."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests import replies as r
from tests.engine import EMPTY, REVISIONS, start
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.guards import BudgetError, budgets_for, cost_micros
from toolcalls.models import IdempotencyRecord
from toolcalls.registry import Reconciliation, ToolContext, ToolSpec
from toolcalls.services.escalations import EscalationError, operation_extend, operation_stop
from toolcalls.services.operations import OperationError
from toolcalls.services.reconcile import call_resolve
from toolcalls.services.transitions import OperationEnded
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

S = OperationState


def test_budget_overrides_are_checked_against_the_limits() -> None:
    assert budgets_for({"max_turns": 3})["max_turns"] == 3
    bads = (
        {"max_turns": 0},
        {"max_turns": True},
        {"max_turns": 10_000},
        {"nope": 1},
        {"max_parallel": 0.5},  # would leave no slot to run anything
        {"max_turns": 2.5},
    )
    for bad in bads:
        with pytest.raises(BudgetError):
            budgets_for(bad)


def test_counted_budgets_are_whole_numbers_and_seconds_and_dollars_need_not_be() -> None:
    budgets = budgets_for({"max_tool_calls": 4.0, "max_cost_usd": 0.25, "deadline_s": 90.5})
    assert budgets["max_tool_calls"] == 4 and isinstance(budgets["max_tool_calls"], int)
    assert (budgets["max_cost_usd"], budgets["deadline_s"]) == (0.25, 90.5)


def test_an_operation_cannot_start_with_a_bad_budget(demo) -> None:
    with pytest.raises(OperationError) as exc:
        start(demo, [r.final()], budgets={"max_parallel": 99})
    assert exc.value.code == "bad_budget"


def test_cost_comes_from_the_longest_matching_price() -> None:
    assert cost_micros(model="gpt-5.1-2025-11-13", input_tokens=1000, output_tokens=100) == 2250
    assert cost_micros(model="claude-opus-4-1", input_tokens=10, output_tokens=0) == 150
    assert cost_micros(model="some-unpriced-model", input_tokens=10**6, output_tokens=0) == 0


def test_counters_are_kept_on_the_operation(demo) -> None:
    calls = [
        r.call("a", "get_order", {"order_id": "ORD-1001"}),
        r.call("b", "get_order", {"order_id": "ORD-1002"}),
    ]
    operation = start(demo, [r.response(*calls), r.final()])
    assert operation.state == S.COMPLETED
    assert (operation.turn_count, operation.tool_call_count) == (2, 2)
    assert operation.calls_per_tool == {"get_order": 2}
    assert (operation.input_tokens, operation.output_tokens) == (200, 40)
    assert operation.cost_micros == 2 * (100 * 1.25 + 20 * 10)
    assert operation.no_progress_turns == 0


def test_extension_refusals(demo) -> None:
    replies = [
        r.response(r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"})) for i in (1, 2, 3)
    ]
    operation = start(demo, [*replies, r.final()], budgets={"max_turns": 1})
    assert operation.state == S.ESCALATED
    refusals = [
        ({"max_turns": 1}, "still_over"),
        ({"max_turns": 1000}, "bad_budget"),
        ({"max_turns": 5, "max_tool_calls": 1}, "bad_budget"),  # lowered: would trip again
        ({"max_turns": 5, "deadline_s": 1}, "bad_budget"),
    ]
    for budgets, code in refusals:
        with pytest.raises(EscalationError) as exc:
            operation_extend(operation_pk=operation.pk, actor=Actor.system("test"), budgets=budgets)
        assert exc.value.code == code
    for blank in (" ", "\u200b", "\ufeff\u2060", "\u2800", "\u3164 \uffa0"):
        with pytest.raises(EscalationError, match="say why"):
            operation_stop(operation_pk=operation.pk, actor=Actor.system("test"), reason=blank)
    operation_extend(
        operation_pk=operation.pk, actor=Actor.system("test"), budgets={"max_turns": 10}
    )
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED
    for reason in ("late", "", " "):  # ended, whatever the reason
        with pytest.raises(OperationEnded) as ended:
            operation_stop(operation_pk=operation.pk, actor=Actor.system("test"), reason=reason)
        assert ended.value.code == "already_ended"


def test_an_extension_that_does_not_raise_the_tripped_budget_is_refused(demo) -> None:
    lookups = [r.call(f"g{i}", "get_order", {"order_id": f"ORD-100{i}"}) for i in (1, 2)]
    operation = start(demo, [r.response(*lookups), r.final()], budgets={"max_tool_calls": 1})
    assert operation.state == S.ESCALATED
    assert operation.terminal_reason.startswith("MAX_TOOL_CALLS")
    for budgets in ({}, {"max_tool_calls": 1}, {"max_turns": 20}):
        with pytest.raises(EscalationError) as exc:
            operation_extend(operation_pk=operation.pk, actor=Actor.system("test"), budgets=budgets)
        assert (exc.value.code, "raise max_tool_calls" in exc.value.message) == ("still_over", True)
    operation.refresh_from_db()
    assert (operation.state, operation.turn_count) == (S.ESCALATED, 1)
    operation_extend(
        operation_pk=operation.pk, actor=Actor.system("test"), budgets={"max_tool_calls": 5}
    )
    operation.refresh_from_db()
    assert operation.state == S.COMPLETED


def test_a_read_tool_is_retried_after_a_crash_within_bounds(demo, tool) -> None:
    attempts: list[int] = []

    def flaky(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("downstream hiccup")
        return {"ok": True}

    tool(name="flaky_read", handler=flaky)
    operation = start(
        demo, [r.response(r.call("f", "flaky_read", {})), r.final()], tool_names=["flaky_read"]
    )
    call = operation.calls.get()
    assert (call.state, call.attempt, len(attempts)) == (CallState.SUCCEEDED, 3, 3)

    def broken(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        raise RuntimeError("always")

    tool(name="broken_read", handler=broken)
    operation = start(
        demo, [r.response(r.call("b", "broken_read", {})), r.final()], tool_names=["broken_read"]
    )
    call = operation.calls.get()
    assert (call.state, call.error_code, call.attempt) == (CallState.FAILED, "TOOL_FAILED", 3)
    assert "RuntimeError" in (call.protected_audit or {})["handler"]["detail"]
    assert "always" not in str(call.model_result)  # internals stay out of the model's view


def test_oversized_results_are_truncated_or_rejected_by_spec(demo, tool) -> None:
    big = {"blob": "x" * 5000}
    tool(name="big_truncated", handler=lambda ctx, args: big, max_result_bytes=1000)
    tool(
        name="big_rejected", handler=lambda ctx, args: big, max_result_bytes=1000, oversize="reject"
    )
    calls = [r.call("t", "big_truncated", {}), r.call("j", "big_rejected", {})]
    operation = start(
        demo, [r.response(*calls), r.final()], tool_names=["big_truncated", "big_rejected"]
    )
    truncated, rejected = (
        operation.calls.get(provider_call_id="t"),
        operation.calls.get(provider_call_id="j"),
    )
    assert truncated.state == CallState.SUCCEEDED
    data = (truncated.model_result or {})["data"]
    assert data["truncated"] is True
    assert data["original_bytes"] == len('{"blob":"' + "x" * 5000 + '"}')
    assert (rejected.state, rejected.error_code) == (CallState.FAILED, "RESULT_TOO_LARGE")
    side_effect = ToolSpec(
        name="write_rejected",
        description="Writes.",
        parameters=EMPTY,
        schema_version="v1",
        risk="write",
        timeout_ms=100,
        handler=lambda ctx, args: {},
        idempotency_key=lambda ctx, args: "k",
        oversize="reject",
        revisions=REVISIONS,
    )
    with pytest.raises(ImproperlyConfigured, match="cannot be rejected"):
        registry.register(side_effect)


def _hanging_write(tool, name: str, **fields: Any) -> threading.Event:  # type: ignore[no-untyped-def]
    release = threading.Event()

    def hang(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        release.wait(5)
        return {"done": True}

    tool(
        name=name,
        handler=hang,
        risk="write",
        timeout_ms=50,
        idempotency_key=lambda c, a: f"{name}:{c.operation_id}",
        **fields,
    )
    return release


@pytest.mark.parametrize(
    ("resolution", "state", "code", "key_state"),
    [
        ("applied", CallState.SUCCEEDED, "", IdempotencyRecord.State.DONE),
        ("not_applied", CallState.FAILED, "NOT_APPLIED", None),
        ("unknown", CallState.FAILED, "UNKNOWN_OUTCOME", IdempotencyRecord.State.IN_FLIGHT),
    ],
)
def test_a_human_resolves_an_unknown_outcome(
    demo, tool, resolution, state, code, key_state
) -> None:  # type: ignore[no-untyped-def]
    release = _hanging_write(tool, "hanging_write")
    try:
        operation = start(
            demo,
            [r.response(r.call("h", "hanging_write", {})), r.final()],
            tool_names=["hanging_write"],
        )
        assert operation.state == S.ESCALATED
        with pytest.raises(EscalationError) as exc:
            operation_extend(operation_pk=operation.pk, actor=Actor.system("test"), budgets={})
        assert exc.value.code == "needs_resolution"
        call = operation.calls.get()
        call_resolve(
            call_pk=call.pk, actor=Actor.system("test"), resolution=resolution, note="checked"
        )
        operation.refresh_from_db()
        call.refresh_from_db()
        assert operation.state == S.COMPLETED
        assert (call.state, call.error_code) == (state, code)
        record = IdempotencyRecord.objects.filter(call=call).first()
        assert (record.state if record else None) == key_state
        with pytest.raises(EscalationError) as settled:  # nothing is left to record
            call_resolve(call_pk=call.pk, actor=Actor.system("test"), resolution=resolution)
        assert settled.value.code == "not_unknown_outcome"
    finally:
        release.set()


def test_a_reconciler_that_finds_nothing_lets_the_call_run_again(demo, tool) -> None:
    runs: list[int] = []

    def first_time_hangs(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
        runs.append(1)
        if len(runs) == 1:
            threading.Event().wait(0.3)
        return {"done": len(runs)}

    tool(
        name="retried_write",
        handler=first_time_hangs,
        risk="write",
        timeout_ms=100,
        idempotency_key=lambda c, a: "retried:one",
        reconcile=lambda ctx, key: Reconciliation(applied=False),
    )
    operation = start(
        demo,
        [r.response(r.call("w", "retried_write", {})), r.final()],
        tool_names=["retried_write"],
    )
    call = operation.calls.get()
    assert operation.state == S.COMPLETED
    assert (call.state, call.attempt) == (CallState.SUCCEEDED, 2)
    transitions = [(e.from_state, e.to_state) for e in call.events.filter(kind="call.transition")]
    assert (CallState.UNKNOWN_OUTCOME, CallState.PROPOSED) in transitions
    assert IdempotencyRecord.objects.get().state == IdempotencyRecord.State.DONE
