"""Hand ready calls of a call set to workers, never more at once than ``max_parallel``."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from toolcalls.models import Operation, ToolCall
from toolcalls.services.enqueue import enqueue_execute
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


def call_set_start_ready(
    *, operation: Operation, turn_id: int, calls: Sequence[ToolCall] | None = None
) -> int:
    """Queue the next ready calls of the set (:func:`calls_ready`); returns how many were
    queued. The caller holds the operation lock; ``calls`` are the set's rows when the caller
    holds them current already."""
    rows = list(calls) if calls is not None else list(ToolCall.objects.filter(turn_id=turn_id))
    ready = [call.pk for call in calls_ready(operation=operation, calls=rows)]
    if not ready:
        return 0
    ToolCall.objects.filter(pk__in=ready).update(queued_at=timezone.now())
    for call_pk in ready:
        enqueue_execute(call_pk=call_pk)
    return len(ready)
