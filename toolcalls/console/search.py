"""Find operations for support staff (the console's search box): by any Callgate ID or its
prefix, any provider ID or idempotency key, the subject (customer), or a business identifier a
tool declares searchable. The search keys of the last two are made here, for the engine to
insert with the audit events that carry them (its audit row hook)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet

from approvals.models import ApprovalRequest
from approvals.selectors import user_tenant_ids
from toolcalls import catalogue
from toolcalls.console.models import SearchKey
from toolcalls.keyset import Page, keyset_page
from toolcalls.models import AuditEvent, IdempotencyRecord, ModelTurn, Operation, ToolCall
from toolcalls.selectors import NEWEST_FIRST
from toolcalls.states import AuditKind, CallState

#: Operations one search collects at most, over every kind of match; the page says "N+" beyond.
SEARCH_CAP = 500
#: Results per page.
SEARCH_PAGE_SIZE = 20
#: Calls whose arguments (and, once it ran, result) are read for search keys: parked, started,
#: finished. A call read twice adds nothing (one row per operation, field and value).
_KEYED_STATES = frozenset({CallState.WAITING_APPROVAL, CallState.EXECUTING, CallState.SUCCEEDED})


def search_keys_of(event: AuditEvent) -> list[SearchKey]:
    """The engine's audit row source (``toolcalls.hooks``): an operation's subject when it is
    created, and the declared business identifiers of a call's arguments and result as the
    call moves on, as search keys to insert with the event."""
    operation = event.operation
    if event.kind == AuditKind.OPERATION_CREATED:
        return _keys(operation, {"customer": operation.subject_ref})
    if event.kind != AuditKind.CALL_TRANSITION or event.to_state not in _KEYED_STATES:
        return []
    call = event.call
    spec = catalogue.tool_spec(operation, call.tool_name) if call else None
    if call is None or spec is None or not spec.search_fields:
        return []
    result = call.model_result or {}
    data = result.get("data") if result.get("status") == "ok" else None
    found: dict[str, Any] = {}
    for source in (call.arguments, data):
        if isinstance(source, Mapping):
            found |= {name: source[name] for name in spec.search_fields if name in source}
    return _keys(operation, found)


def _keys(operation: Operation, values: Mapping[str, Any]) -> list[SearchKey]:
    return [
        SearchKey(
            tenant_id=operation.tenant_id,
            operation=operation,
            field=field,
            value=str(value).lower()[:200],
        )
        for field, value in values.items()
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value)
    ]


@dataclass(frozen=True)
class SearchResults:
    """One page of operations found, each with what matched; ``count`` operations in all
    (capped at :data:`SEARCH_CAP`, ``capped`` then says there may be more)."""

    page: Page[Operation]
    matched: dict[int, str]
    count: int
    capped: bool


def operation_search(*, user: User, query: str, cursor: str | None = None) -> SearchResults:
    """Operations of the user's tenants that ``query`` names, newest first, keyset-paged.

    Callgate IDs (operation, call, approval) match by prefix in any case; provider call and
    response IDs and idempotency keys match exactly; the subject and declared business
    identifiers match by prefix in any case. Each lookup uses an index; nothing is scanned.
    """
    query = query.strip()
    tenants = user_tenant_ids(user=user) if query else []
    found = _matches(query, tenants) if query else {}
    operations = (
        Operation.objects.filter(tenant_id__in=tenants, pk__in=found)
        .select_related("tenant")
        .defer("conversation")
    )
    page = keyset_page(operations, keys=NEWEST_FIRST, cursor=cursor, size=SEARCH_PAGE_SIZE)
    return SearchResults(
        page=page, matched=found, count=len(found), capped=len(found) >= SEARCH_CAP
    )


def _matches(query: str, tenants: list[int]) -> dict[int, str]:
    """Operation primary key → what matched, over every kind of ID, at most
    :data:`SEARCH_CAP` operations."""
    folded = query.lower()
    calls = ToolCall.objects.filter(operation__tenant_id__in=tenants)
    sources: list[tuple[str, QuerySet[Any]]] = [
        (
            "operation ID",
            _pks(Operation.objects.filter(tenant_id__in=tenants), "pk", public_id=folded),
        ),
        ("call ID", _pks(calls, "operation_id", public_id=folded)),
        (
            "approval ID",
            _pks(
                ApprovalRequest.objects.filter(tenant_id__in=tenants),
                "operation_id",
                public_id=folded,
            ),
        ),
        (
            "provider call ID",
            calls.filter(provider_call_id=query).values_list("operation_id", flat=True),
        ),
        (
            "idempotency key",
            calls.filter(idempotency_key=query).values_list("operation_id", flat=True),
        ),
        (
            "idempotency key",
            IdempotencyRecord.objects.filter(tenant_id__in=tenants, key=query).values_list(
                "call__operation_id", flat=True
            ),
        ),
        (
            "provider response ID",
            ModelTurn.objects.filter(
                operation__tenant_id__in=tenants, response_id=query
            ).values_list("operation_id", flat=True),
        ),
    ]
    found: dict[int, str] = {}
    for label, pks in sources:
        _add(found, label, pks)
    keys = SearchKey.objects.filter(tenant_id__in=tenants, value__startswith=folded)
    for pk, field, value in keys.values_list("operation_id", "field", "value")[:SEARCH_CAP]:
        found.setdefault(pk, f"{field.removesuffix('_id').replace('_', ' ')} {value}")
    return dict(list(found.items())[:SEARCH_CAP])


def _pks(rows: QuerySet[Any], column: str, *, public_id: str) -> QuerySet[Any]:
    """The operations of ``rows`` whose public ID starts with ``public_id`` (lower-case, as
    Callgate's IDs are; the unique index serves the prefix)."""
    return rows.filter(public_id__startswith=public_id).values_list(column, flat=True)


def _add(found: dict[int, str], label: str, pks: Iterable[int]) -> None:
    for pk in list(pks[:SEARCH_CAP]):  # type: ignore[index]
        found.setdefault(pk, label)
