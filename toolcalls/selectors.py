"""Reads of operations for the console, scoped to the user's tenants."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Prefetch, QuerySet

from toolcalls.models import AuditEvent, ModelTurn, Operation, ToolCall


def operations_visible(*, user: User) -> QuerySet[Operation]:
    return Operation.objects.filter(tenant__members=user)


def operation_get(*, user: User, public_id: str) -> Operation:
    """The operation with its turns (and their calls) prefetched; raises
    ``Operation.DoesNotExist`` when it is not in one of the user's tenants."""
    calls = ToolCall.objects.order_by("position")
    turns = ModelTurn.objects.defer("request_body", "reply").order_by("index")
    return (
        operations_visible(user=user)
        .select_related("tenant", "requested_by")
        .defer("conversation")
        .prefetch_related(
            Prefetch("turns", queryset=turns), Prefetch("turns__calls", queryset=calls)
        )
        .get(public_id=public_id)
    )


def operation_timeline(*, operation: Operation) -> QuerySet[AuditEvent]:
    """The operation's audit events in order, with the call each one concerns."""
    return operation.events.select_related("call").order_by("seq")
