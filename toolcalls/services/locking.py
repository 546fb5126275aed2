"""Row locks for a step on one call, taken in the order every step takes them."""

from __future__ import annotations

from django.db.models import Subquery

from toolcalls.models import Operation, ToolCall


def call_lock(call_pk: int) -> tuple[Operation, ToolCall]:
    """Lock the call's operation, then the call (lock order everywhere: operation, then its
    children); returns both, with the operation's tenant and the call's turn loaded.

    Only those two rows are locked: the tenant and the turn are read, never written, and locking
    the tenant would serialise every operation of the tenant. The turn's request and reply (the
    whole conversation) are not read. Call inside a transaction; raises ``DoesNotExist`` for an
    unknown ``call_pk``.
    """
    owner = ToolCall.objects.filter(pk=call_pk).values("operation_id")
    operation = (
        Operation.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .get(pk=Subquery(owner))
    )
    call = (
        ToolCall.objects.select_for_update(of=("self",))
        .select_related("turn")
        .defer("turn__request_body", "turn__reply")
        .get(pk=call_pk)
    )
    return operation, call
