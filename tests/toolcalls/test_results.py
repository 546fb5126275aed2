"""Results: the one envelope per call, bound to its call; settling a set; the size limit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from tests.engine import call_set, wakeups_in
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.envelopes import ok
from toolcalls.errors import CallgateError
from toolcalls.models import Operation, ToolCall
from toolcalls.registry import ToolSpec
from toolcalls.services.results import (
    BindingMismatch,
    call_finish,
    call_set_results,
    success_envelope,
)
from toolcalls.services.unit import call_step
from toolcalls.states import CallState, OperationState

pytestmark = pytest.mark.django_db
TEST = Actor.system("test")
Capture = Callable[..., Any]


def _finish(call: ToolCall, data: Any = None) -> None:
    with call_step(call.pk) as step:
        result = ok(data or {"order": "ORD-1001"})
        call_finish(step, step.call, to_state=CallState.SUCCEEDED, model_result=result, actor=TEST)


def test_the_last_result_makes_the_set_ready_and_wakes_the_next_turn(
    django_capture_on_commit_callbacks: Capture,
) -> None:
    first, second = call_set(CallState.EXECUTING, CallState.EXECUTING)
    with django_capture_on_commit_callbacks() as wakeups:
        _finish(first)
    assert Operation.objects.get(pk=first.operation_id).state == OperationState.EXECUTING
    assert wakeups_in(wakeups) == []
    with django_capture_on_commit_callbacks() as wakeups:
        _finish(second, {"order": "ORD-1002"})
    operation = Operation.objects.get(pk=first.operation_id)
    assert operation.state == OperationState.RESULTS_READY
    assert operation.no_progress_turns == 0  # new results are progress
    assert len(wakeups_in(wakeups)) == 1


def test_a_call_waiting_for_a_human_keeps_the_set_parked() -> None:
    waiting, running = call_set(CallState.WAITING_APPROVAL, CallState.EXECUTING)
    _finish(running)
    waiting.operation.refresh_from_db()
    assert waiting.operation.state == OperationState.WAITING_APPROVAL


def test_an_escalated_operation_does_not_move_on_by_itself() -> None:
    [call] = call_set(CallState.EXECUTING, operation_state=OperationState.ESCALATED)
    _finish(call)
    call.refresh_from_db()
    call.operation.refresh_from_db()
    assert call.state == CallState.SUCCEEDED
    assert call.operation.state == OperationState.ESCALATED


def test_results_go_back_only_while_their_binding_holds() -> None:
    [call] = call_set(CallState.EXECUTING)
    _finish(call)
    call.refresh_from_db()
    assert call.binding_sha256 and call.result_sha256
    [message] = call_set_results(operation=call.operation)
    assert (message.call_id, message.is_error) == (call.provider_call_id, False)
    ToolCall.objects.filter(pk=call.pk).update(model_result=ok({"order": "forged"}))
    with pytest.raises(BindingMismatch) as exc:
        call_set_results(operation=call.operation)
    assert isinstance(exc.value, CallgateError) and exc.value.code == "binding_mismatch"
    assert "result_sha256" in exc.value.fields


def test_the_model_hears_when_an_operator_edited_the_arguments() -> None:
    [call] = call_set(CallState.EXECUTING)
    ToolCall.objects.filter(pk=call.pk).update(arguments_edited=True)
    _finish(call)
    call.refresh_from_db()
    assert call.model_result is not None
    assert call.model_result["arguments"] == call.arguments
    assert "edited" in call.model_result["note"]


def _spec(**changes: Any) -> ToolSpec:
    spec = registry.get("get_order")
    assert spec is not None
    return dataclasses.replace(spec, **changes)


def test_a_result_over_the_limit_is_truncated_or_rejected() -> None:
    data = {"text": "x" * 500}
    state, result, audit = success_envelope(_spec(max_result_bytes=100), data)
    assert state == CallState.SUCCEEDED and result["data"]["truncated"] is True
    assert audit["limit_bytes"] == 100 and audit["result_bytes"] > 500
    rejected = success_envelope(_spec(max_result_bytes=100, oversize="reject"), data)
    assert rejected[0] == CallState.FAILED
    assert rejected[1]["error"]["code"] == "RESULT_TOO_LARGE"


def test_a_result_that_is_not_plain_json_fails() -> None:
    state, result, _ = success_envelope(_spec(), {"when": object()})
    assert state == CallState.FAILED and result["error"]["code"] == "TOOL_FAILED"
