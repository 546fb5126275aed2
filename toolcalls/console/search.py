"""Find operations by any ID they carry, for support staff (the console's search box)."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import Q

from approvals.models import ApprovalRequest
from toolcalls.models import IdempotencyRecord, ModelTurn, Operation, ToolCall
from toolcalls.selectors import operations_visible

#: Search results shown at most.
SEARCH_LIMIT = 20


def operation_search(*, user: User, query: str) -> list[tuple[Operation, str]]:
    """Operations of the user's tenants that ``query`` names exactly, with what it matched:
    operation ID, Callgate or provider call ID, approval ID, idempotency key, or provider
    response ID. Each lookup uses an index; nothing is scanned."""
    query = query.strip()
    if not query:
        return []
    calls = ToolCall.objects.filter(
        Q(public_id=query) | Q(provider_call_id=query) | Q(idempotency_key=query)
    ).values_list("operation_id", flat=True)
    turns = ModelTurn.objects.filter(response_id=query).values_list("operation_id", flat=True)
    approvals = ApprovalRequest.objects.filter(public_id=query)
    keys = IdempotencyRecord.objects.filter(key=query).values_list("call__operation_id", flat=True)
    matches = {
        "operation ID": Operation.objects.filter(public_id=query).values_list("pk", flat=True),
        "call": calls,
        "provider response ID": turns,
        "approval ID": approvals.values_list("operation_id", flat=True),
        "idempotency key": keys,
    }
    found: dict[int, str] = {}
    for label, ids in matches.items():
        for pk in ids[:SEARCH_LIMIT]:
            found.setdefault(pk, label)
    operations = operations_visible(user=user).filter(pk__in=found).select_related("tenant")
    return [(operation, found[operation.pk]) for operation in operations.order_by("-created_at")]
