"""Hand ready calls of a call set to workers, never more at once than ``max_parallel``."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from toolcalls.models import Operation, ToolCall
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.services.unit import Step
from toolcalls.states import CallState


def calls_ready(*, operation: Operation, calls: Sequence[ToolCall]) -> list[ToolCall]:
    """The calls of a set to hand to workers now: ready ones in position order, up to the
    operation's ``max_parallel`` budget less those in flight (pure: reads only ``calls``).

    Ready: PROPOSED (validated, not parked, not yet handed over). In flight: EXECUTING, or
    handed over and not yet claimed.
    """
    in_flight = sum(
        1
        for call in calls
        if call.state == CallState.EXECUTING
        or (call.state == CallState.PROPOSED and call.queued_at is not None)
    )
    room = int(operation.budgets.get("max_parallel", 1)) - in_flight
    waiting = [c for c in calls if c.state == CallState.PROPOSED and c.queued_at is None]
    return sorted(waiting, key=lambda c: c.position)[: max(room, 0)]


def call_set_start_ready(step: Step, *, turn_id: int) -> int:
    """Hand the next ready calls of the set (:func:`calls_ready`) to workers: mark them queued
    and wake a worker for each after commit; returns how many."""
    ready = calls_ready(operation=step.operation, calls=step.call_set(turn_id))
    now = timezone.now()
    for call in ready:
        call.queued_at = now
        step.change(call, "queued_at")
        enqueue_execute(step, call_pk=call.pk)
    return len(ready)
