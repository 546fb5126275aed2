"""Reads of operations for the console, scoped to the user's tenants."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import Prefetch, QuerySet

from toolcalls.guards import GUARDS, cost_micros
from toolcalls.models import AuditEvent, ModelTurn, Operation, Tenant, ToolCall
from toolcalls.states import OperationState


def operations_visible(*, user: User) -> QuerySet[Operation]:
    """Operations of the user's tenants."""
    tenants = Tenant.objects.filter(members=user).values_list("pk", flat=True)
    return Operation.objects.filter(tenant_id__in=list(tenants))


def operations_escalated(*, user: User, limit: int = 100) -> list[Operation]:
    """Escalated operations of the user's tenants, most recently changed first."""
    return list(
        operations_visible(user=user)
        .filter(state=OperationState.ESCALATED)
        .select_related("tenant")
        .defer("conversation")
        .order_by("-updated_at")[:limit]
    )


def operation_get(*, user: User, public_id: str) -> Operation:
    """The operation with its turns (and their calls), its parent and its follow-ups (oldest
    first; ID and state) prefetched; raises ``Operation.DoesNotExist`` when it is not in one of
    the user's tenants."""
    calls = ToolCall.objects.order_by("position")
    turns = ModelTurn.objects.defer("request_frame", "request_items", "reply").order_by("index")
    follow_ups = Operation.objects.only("public_id", "state", "parent_id").order_by("created_at")
    return (
        operations_visible(user=user)
        .select_related("tenant", "requested_by", "agent_revision__profile", "parent")
        .defer("conversation", "parent__conversation")
        .prefetch_related(
            Prefetch("turns", queryset=turns),
            Prefetch("turns__calls", queryset=calls),
            Prefetch("follow_ups", queryset=follow_ups),
        )
        .get(public_id=public_id)
    )


def operation_timeline(*, operation: Operation) -> QuerySet[AuditEvent]:
    """The operation's audit events in order, with the call each one concerns."""
    return operation.events.select_related("call").order_by("seq")


def operation_guards(*, operation: Operation) -> list[dict[str, Any]]:
    """Each guard's limit and what the operation used of it, for the console."""
    used = {
        "max_turns": operation.turn_count,
        "max_tool_calls": operation.tool_call_count,
        "max_calls_per_tool": max(operation.calls_per_tool.values(), default=0),
        "deadline_s": None,
        "max_input_tokens": operation.input_tokens,
        "max_output_tokens": operation.output_tokens,
        "max_cost_usd": round(operation.cost_micros / 1_000_000, 6),
        "max_parallel": None,
        "max_no_progress_turns": operation.no_progress_turns,
    }
    return [
        {"name": name, "unit": unit, "limit": operation.budgets.get(name), "used": used[name]}
        for name, (_code, unit) in GUARDS.items()
    ]


def operation_turns_with_cost(*, operation: Operation) -> list[dict[str, Any]]:
    """The prefetched turns, each as ``{"turn", "calls", "cost_micros"}`` (micro-USD)."""
    return [
        {
            "turn": turn,
            "calls": list(turn.calls.all()),
            "cost_micros": cost_micros(
                model=turn.model, input_tokens=turn.input_tokens, output_tokens=turn.output_tokens
            ),
        }
        for turn in operation.turns.all()
    ]
