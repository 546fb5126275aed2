"""Hand ready calls of a call set to workers, never more at once than ``max_parallel``."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from toolcalls.models import Operation, ToolCall
from toolcalls.services.enqueue import enqueue_execute
from toolcalls.states import CallState


def call_set_start_ready(*, operation: Operation, turn_id: int) -> int:
    """Queue the next ready calls of the set (position order) up to the operation's
    ``max_parallel`` budget; returns how many were queued. The caller holds the operation lock.

    Ready: PROPOSED (validated, not parked, not yet handed over). In flight: EXECUTING, or
    handed over and not yet claimed.
    """
    calls = ToolCall.objects.filter(turn_id=turn_id)
    in_flight = calls.filter(
        Q(state=CallState.EXECUTING) | Q(state=CallState.PROPOSED, queued_at__isnull=False)
    ).count()
    room = int(operation.budgets.get("max_parallel", 1)) - in_flight
    if room <= 0:
        return 0
    ready = list(
        calls.filter(state=CallState.PROPOSED, queued_at__isnull=True)
        .order_by("position")
        .values_list("pk", flat=True)[:room]
    )
    ToolCall.objects.filter(pk__in=ready).update(queued_at=timezone.now())
    for call_pk in ready:
        enqueue_execute(call_pk=call_pk)
    return len(ready)
