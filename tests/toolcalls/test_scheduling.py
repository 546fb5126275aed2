"""Which ready calls of a set are handed to workers: position order, within ``max_parallel``."""

from __future__ import annotations

from django.utils import timezone

from toolcalls.models import Operation, ToolCall
from toolcalls.services.scheduling import calls_ready
from toolcalls.states import CallState


def _call(position: int, state: str = CallState.PROPOSED, queued: bool = False) -> ToolCall:
    return ToolCall(position=position, state=state, queued_at=timezone.now() if queued else None)


def _operation(max_parallel: int) -> Operation:
    return Operation(budgets={"max_parallel": max_parallel})


def test_ready_calls_start_in_position_order_up_to_the_budget() -> None:
    calls = [_call(2), _call(0), _call(1)]
    ready = calls_ready(operation=_operation(2), calls=calls)
    assert [call.position for call in ready] == [0, 1]


def test_calls_in_flight_take_their_room() -> None:
    calls = [
        _call(0, CallState.EXECUTING),
        _call(1, queued=True),  # handed over, not yet claimed
        _call(2),
        _call(3),
    ]
    assert [c.position for c in calls_ready(operation=_operation(3), calls=calls)] == [2]
    assert calls_ready(operation=_operation(2), calls=calls) == []


def test_only_proposed_calls_not_yet_handed_over_are_ready() -> None:
    calls = [
        _call(0, CallState.WAITING_APPROVAL),
        _call(1, CallState.APPROVED),
        _call(2, CallState.SUCCEEDED),
        _call(3, CallState.REJECTED),
    ]
    assert calls_ready(operation=_operation(4), calls=calls) == []


def test_the_budget_defaults_to_one_call_at_a_time() -> None:
    calls = [_call(0), _call(1)]
    assert [c.position for c in calls_ready(operation=Operation(budgets={}), calls=calls)] == [0]
