"""Reads for the console: always scoped to the tenants the user belongs to."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from approvals.models import AMOUNT, DECIDABLE, RISK_RANK, ApprovalRequest, own
from approvals.states import ApprovalState
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.diffs import arguments_diff
from toolcalls.keyset import Key, Page, keyset_page, ordering
from toolcalls.models import Operation, Tenant, ToolCall
from toolcalls.registry import ToolError
from toolcalls.selectors import principal_names
from toolcalls.services.approvals import precondition_refusal
from toolcalls.services.results import tool_context
from toolcalls.states import CallState
from toolcalls.storage import storable

#: The header shows "1000+" beyond this, so the count never scans a big table.
PENDING_COUNT_CAP = 1000
#: Approvals per queue page.
PAGE_SIZE = 50
#: "Expiring soon" means within this long.
EXPIRING_SOON = timedelta(minutes=15)


def user_tenant_ids(*, user: User) -> list[int]:
    """The tenants the user belongs to (one small query; lets queue queries use their index)."""
    return list(Tenant.objects.filter(members=user).values_list("pk", flat=True))


def approvals_visible(*, user: User) -> QuerySet[ApprovalRequest]:
    """Every approval of the user's tenants."""
    return ApprovalRequest.objects.filter(tenant_id__in=user_tenant_ids(user=user))


def _pending(user: User) -> QuerySet[ApprovalRequest]:
    return approvals_visible(user=user).filter(DECIDABLE)


def approvals_pending_count(*, user: User) -> int:
    """Pending approvals of the user's tenants, counted up to :data:`PENDING_COUNT_CAP`."""
    # In queue order, so PostgreSQL walks the queue index over pending rows only. Unordered,
    # it may merge-join on the operation key instead, reading every decided approval older
    # than the first pending one: 85 ms at 100k decided, growing with the history.
    return _pending(user).order_by("expires_at", "pk")[:PENDING_COUNT_CAP].count()


@dataclass(frozen=True)
class QueueFilters:
    """Queue filters and order from the query string; empty values filter nothing. Amounts are
    in cents; ``sort`` is a key of :data:`QUEUE_SORTS`."""

    tool: str = ""
    risk: str = ""
    tenant: str = ""
    requester: str = ""
    amount_min: int | None = None
    amount_max: int | None = None
    expiring: bool = False
    sort: str = "expiry"

    def query(self) -> dict[str, str]:
        """The filters as query-string parameters (for links to the next page), amounts in the
        currency's units as the form takes them."""
        values = {
            "tool": self.tool,
            "risk": self.risk,
            "tenant": self.tenant,
            "requester": self.requester,
            "amount_min": _units(self.amount_min),
            "amount_max": _units(self.amount_max),
            "expiring": "1" if self.expiring else "",
            "sort": "" if self.sort == "expiry" else self.sort,
        }
        return {name: value for name, value in values.items() if value}


def _units(cents: int | None) -> str:
    return "" if cents is None else f"{cents / 100:.2f}"


#: The queue's orders: soonest expiry, oldest first, largest amount (none last), highest risk
#: (then soonest expiry). Each is indexed (``ApprovalRequest.Meta.indexes``).
QUEUE_SORTS: dict[str, tuple[Key, ...]] = {
    "expiry": (Key("expires_at"), Key("pk")),
    "age": (Key("created_at"), Key("pk")),
    "amount": (Key("sort_amount", descending=True), Key("pk")),
    "risk": (Key("risk_rank", descending=True), Key("expires_at"), Key("pk")),
}


def _named(field: str, name: str) -> Q:
    """Rows whose user ``field`` is named ``name`` as :func:`~toolcalls.selectors.principal_names`
    names users: an API key's service as ``service:<key name>``, a person by username or
    ``user:<username>`` (a service user's own username names nobody). The name matches in any
    case (``Operator`` finds ``operator``), as people type it; the prefixes are the audit
    trail's own. The users (people and services, a small table) are read first, one query, so
    the approvals are filtered by their IDs as values the planner weighs: a user named on few
    of a million decided approvals reads those by the column's index, one named on most walks
    the list's own index, where a subquery walked the whole list's index for either (1 s at a
    million decided approvals for someone who decided none)."""
    service, person = (Actor(kind, "").audit_name for kind in ("service", "user"))
    if name.startswith(service):
        users = User.objects.filter(api_keys__name__iexact=name.removeprefix(service))
    else:
        username = name.removeprefix(person)
        users = User.objects.filter(username__iexact=username, api_keys__isnull=True)
    return Q(**{f"{field}__in": list(users.values_list("pk", flat=True))})


def _queue_rows(user: User, filters: QueueFilters) -> QuerySet[ApprovalRequest]:
    # The operation is joined for its state only: its row (the whole conversation) is not read.
    rows = _pending(user).select_related("tenant")
    rows = principal_names(rows, requested_by_name="requested_by")
    rows = rows.annotate(
        sort_amount=AMOUNT, risk_rank=RISK_RANK, started_by_id=F("operation__started_by")
    )
    exact = {"tool_name": filters.tool, "risk": filters.risk, "tenant__slug": filters.tenant}
    rows = rows.filter(**{field: value for field, value in exact.items() if value})
    if filters.requester:
        rows = rows.filter(_named("requested_by", filters.requester))
    if filters.amount_min is not None:
        rows = rows.filter(amount_cents__gte=filters.amount_min)
    if filters.amount_max is not None:
        rows = rows.filter(amount_cents__lte=filters.amount_max)
    if filters.expiring:
        rows = rows.filter(expires_at__lte=timezone.now() + EXPIRING_SOON)
    return rows


def approvals_queue(
    *, user: User, filters: QueueFilters, cursor: str | None = None, size: int = PAGE_SIZE
) -> Page[ApprovalRequest]:
    """One page of pending approvals in the order ``filters.sort`` names, keyset-paginated so a
    page costs the same at row 100,000 as at row 1. Approvals past their expiry that the sweep
    has not reached yet are included (the console shows them expired)."""
    keys = QUEUE_SORTS.get(filters.sort, QUEUE_SORTS["expiry"])
    return keyset_page(_queue_rows(user, filters), keys=keys, cursor=cursor, size=size)


def approval_next(*, user: User, filters: QueueFilters, after: ApprovalRequest) -> str | None:
    """The public ID of the first approval of the queue (same filters and order) that ``user``
    can decide now, other than ``after``; ``None`` when there is none."""
    keys = QUEUE_SORTS.get(filters.sort, QUEUE_SORTS["expiry"])
    rows = (
        _queue_rows(user, filters)
        .exclude(pk=after.pk)
        .exclude(own(user.pk))
        .filter(expires_at__gt=timezone.now())
    )
    return rows.order_by(*ordering(keys)).values_list("public_id", flat=True).first()


#: The decisions history's order: the latest decision first.
DECIDED_ORDER = (Key("decided_at", descending=True), Key("pk", descending=True))


@dataclass(frozen=True)
class DecisionFilters:
    """Filters of the decisions history; empty values filter nothing. ``customer`` is an
    operation's subject (exact, as the operations list takes it); ``requester`` and
    ``decided_by`` name users as :func:`_named` reads them; ``decided_from`` and
    ``decided_to`` bound ``decided_at`` (UTC instants, from inclusive, to exclusive)."""

    state: str = ""
    tool: str = ""
    customer: str = ""
    requester: str = ""
    decided_by: str = ""
    decided_from: datetime | None = None
    decided_to: datetime | None = None


def approvals_decided(
    *, user: User, filters: DecisionFilters, cursor: str | None = None, size: int = PAGE_SIZE
) -> Page[ApprovalRequest]:
    """One page of ended approvals of the user's tenants (approved, denied, expired,
    superseded), most recent first, keyset-paginated on ``(decided_at, id)`` (index
    ``approval_tenant_decided``): a superseded one at the time its operation ended. Each row
    carries ``operation_public_id``, ``operation_state`` (for a superseded one, how its
    operation ended) and ``decided_by_name`` (:func:`~toolcalls.selectors.principal_names`)."""
    tenants = user_tenant_ids(user=user)
    rows: QuerySet[ApprovalRequest] = (
        ApprovalRequest.objects.filter(tenant_id__in=tenants)
        .exclude(state=ApprovalState.PENDING)
        .select_related("tenant")
        .annotate(
            operation_public_id=F("operation__public_id"), operation_state=F("operation__state")
        )
    )
    rows = principal_names(rows, decided_by_name="decided_by")
    rows = _decided_filtered(rows, filters, tenants=tenants)
    return keyset_page(rows, keys=DECIDED_ORDER, cursor=cursor, size=size)


def _decided_filtered(
    rows: QuerySet[ApprovalRequest], filters: DecisionFilters, *, tenants: list[int]
) -> QuerySet[ApprovalRequest]:
    """``rows`` (of the ``tenants``, by primary key) narrowed by ``filters``. The customer is
    one subquery over those tenants' operations (index ``operation_tenant_subject``), each name
    one over the users, the days a range of ``approval_tenant_decided``: a filtered page still
    walks that index in order, or reads a customer's approvals by operation; never the table."""
    exact = {"state": filters.state, "tool_name": filters.tool}
    rows = rows.filter(**{field: value for field, value in exact.items() if value})
    if filters.customer:
        operations = Operation.objects.filter(tenant_id__in=tenants, subject_ref=filters.customer)
        rows = rows.filter(operation__in=operations.values("pk"))
    if filters.requester:
        rows = rows.filter(_named("requested_by", filters.requester))
    if filters.decided_by:
        rows = rows.filter(_named("decided_by", filters.decided_by))
    if filters.decided_from:
        rows = rows.filter(decided_at__gte=filters.decided_from)
    if filters.decided_to:
        rows = rows.filter(decided_at__lt=filters.decided_to)
    return rows


def approvals_ticked(
    *, user: User, public_ids: list[str]
) -> tuple[list[ApprovalRequest], list[str]]:
    """The approvals of the user's tenants that ``public_ids`` name, soonest expiry first (with
    their operation and call, to decide them), and the IDs that name none of them, in the order
    given and each once (as text the page can show: NUL and lone surrogates replaced). An ID of
    another tenant's approval is among the latter, told from one naming nothing by nothing."""
    given = list(dict.fromkeys(public_ids))
    approvals = list(
        approvals_visible(user=user)
        .filter(public_id__in=[value for value in given if storable(value) == value])
        .select_related("operation__tenant", "call")
        .order_by("expires_at", "pk")
    )
    found = {approval.public_id for approval in approvals}
    return approvals, [storable(value) for value in given if value not in found]


def approval_get(*, user: User, public_id: str) -> ApprovalRequest:
    """One approval by public ID, with ``requested_by_name``, ``decided_by_name`` and
    ``edited_by_name`` (:func:`~toolcalls.selectors.principal_names`); raises
    ``ApprovalRequest.DoesNotExist`` for other tenants'."""
    rows = approvals_visible(user=user).select_related("tenant", "operation__tenant", "call__turn")
    rows = principal_names(
        rows,
        requested_by_name="requested_by",
        decided_by_name="decided_by",
        edited_by_name="edited_by",
    )
    return rows.get(public_id=public_id)


def approval_siblings(*, approval: ApprovalRequest) -> QuerySet[ToolCall]:
    """The other calls of the same call set (same model reply)."""
    return (
        ToolCall.objects.filter(turn_id=approval.call.turn_id)
        .exclude(pk=approval.call_id)
        .order_by("position")
    )


def approval_model_said(*, approval: ApprovalRequest) -> str:
    """The model's latest visible text up to the reply that proposed the call ("" if none)."""
    text = (
        approval.operation.turns.filter(index__lte=approval.call.turn.index)
        .exclude(text="")
        .order_by("-index")
        .values_list("text", flat=True)
        .first()
    )
    return text or ""


def approval_earlier_proposals(*, approval: ApprovalRequest) -> list[dict[str, Any]]:
    """Earlier calls of the same tool in this operation, each with its difference from the
    arguments now awaiting approval (``diff`` rows: ``path``, ``change``, ``old``, ``new``)."""
    current = json.loads(approval.canonical_arguments)
    earlier = (
        ToolCall.objects.filter(operation_id=approval.operation_id, tool_name=approval.tool_name)
        .exclude(pk=approval.call_id)
        .filter(turn__index__lte=approval.call.turn.index)
        .select_related("turn")
        .order_by("turn__index", "position")
    )
    return [
        {"call": call, "diff": arguments_diff(call.arguments, current)}
        for call in earlier
        if call.arguments is not None
    ]


def approval_preview(*, approval: ApprovalRequest) -> dict[str, Any] | None:
    """The tool's dry run of the effect: first the precondition an approval and the execution
    check (``ToolSpec.precondition``), then the preview. ``{"error": message}`` when the
    precondition refuses (approving is refused: ``approve_precondition``); else ``{"data": …}``
    (``{}`` without a preview), or ``{"notice": message}`` when the preview raises
    :class:`ToolError` (it informs; approving stays possible). ``None`` for tools with
    neither, and for remote tools: a page view asks no remote server (deciding does)."""
    spec = registry.get(approval.tool_name)
    if spec is None or (spec.preview is None and spec.precondition is None):
        return None
    arguments = json.loads(approval.canonical_arguments)
    refusal = precondition_refusal(
        operation=approval.operation, call=approval.call, arguments=arguments
    )
    if refusal is not None:
        return {"error": refusal.message}
    if spec.preview is None:
        return {"data": {}}
    try:
        return {"data": spec.preview(tool_context(approval.operation, approval.call), arguments)}
    except ToolError as exc:
        return {"notice": exc.message}


def operation_approvals(*, operation: Operation) -> list[ApprovalRequest]:
    """The approvals of one operation (already scoped by the caller), in the order asked, each
    with ``decided_by_name`` (:func:`~toolcalls.selectors.principal_names`)."""
    rows = ApprovalRequest.objects.filter(operation=operation).order_by("created_at", "pk")
    return list(principal_names(rows, decided_by_name="decided_by"))


def operation_currency(
    *, operation: Operation, approvals: list[ApprovalRequest], calls: list[ToolCall]
) -> str:
    """The currency the console shows ``operation``'s amounts in cents in, where what shows
    them names none ("" when nothing does): the one its approvals' summaries name, as the
    approval pages show them; else one its calls' results or arguments name (an order looked
    up); else the one the tool's summary names for its first call of a tool with a summary, as
    an approval of that call would have recorded it (the same reads, for one call at most)."""
    for approval in approvals:
        if found := _currency(approval.summary):
            return found
    for call in calls:
        result = call.model_result if isinstance(call.model_result, dict) else {}
        if found := _currency(result.get("data")) or _currency(call.arguments):
            return found
    return _summary_currency(operation, calls)


def _currency(value: Any) -> str:
    """The ``currency`` a summary (``[field, value]`` pairs) or an object names, else ""."""
    if isinstance(value, list):
        value = dict(pair for pair in value if isinstance(pair, list) and len(pair) == 2)
    found = value.get("currency") if isinstance(value, dict) else None
    return found if isinstance(found, str) else ""


def _summary_currency(operation: Operation, calls: list[ToolCall]) -> str:
    for call in calls:
        spec = registry.get(call.tool_name)
        # A rejected call's arguments may lack what the summary reads: it is never summarized.
        if spec is None or spec.summary is None or call.state == CallState.REJECTED:
            continue
        if not isinstance(call.arguments, dict):
            continue
        try:
            return _currency(spec.summary(tool_context(operation, call), call.arguments))
        except ToolError:
            return ""
    return ""
