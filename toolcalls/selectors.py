"""Reads of operations for the console, scoped to the user's tenants."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import (
    Case,
    CharField,
    Exists,
    F,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Concat

from toolcalls import catalogue, registry
from toolcalls.actors import Actor
from toolcalls.envelopes import ErrorCode, is_error
from toolcalls.guards import GUARDS, cost_micros
from toolcalls.keyset import Key, Page, keyset_page
from toolcalls.models import AuditEvent, ModelTurn, Operation, Tenant, ToolCall
from toolcalls.services.agents import REVISION
from toolcalls.states import OPERATION_ACTIVE, CallState, OperationState


def operations_visible(*, user: User) -> QuerySet[Operation]:
    """Operations of the user's tenants."""
    tenants = Tenant.objects.filter(members=user).values_list("pk", flat=True)
    return Operation.objects.filter(tenant_id__in=list(tenants))


def principal_names(rows: QuerySet[Any], **fields: str) -> QuerySet[Any]:
    """``rows`` annotated, for each ``alias=field`` (a foreign key to a user, ``None`` allowed),
    with ``alias``: that user's name in the audit trail, ``service:<key name>`` for an API key's
    service user (each key has its own), ``user:<username>`` for a person, NULL for no user.

    Worked out in the rows' own statement, so a page carries strings: user instances with
    their keys prefetched would hold a reference cycle per row for the garbage collector to
    find, which is what made an API list's slowest requests slow. A key is reached through its
    service user's ``api_keys`` (the engine imports none of the API), so the API, the console
    and the approvals' reads share this one rule.
    """
    users = get_user_model()
    service, person = (Value(Actor(kind, "").audit_name) for kind in ("service", "user"))
    names = {}
    for alias, field in fields.items():
        keyed = users.objects.filter(pk=OuterRef(field), api_keys__isnull=False)
        key = keyed.order_by("api_keys__pk").values("api_keys__name")
        username = F(f"{field}__{users.USERNAME_FIELD}")
        names[alias] = Case(
            When(Exists(keyed), then=Concat(service, Subquery(key[:1]))),
            When(**{f"{field}__isnull": False}, then=Concat(person, username)),
            default=None,
            output_field=CharField(),
        )
    return rows.annotate(**names)


@dataclass(frozen=True)
class FilterChoices:
    """What the console's list filters offer: the slugs of the user's ``tenants`` and the
    ``tools`` their history may name (both sorted)."""

    tenants: list[str]
    tools: list[str]


def filter_choices(*, user: User) -> FilterChoices:
    """The user's tenants and every tool name their calls and approvals may hold: each deployed
    tool (the registry's, enabled for a tenant or not) and each remote tool of those tenants on
    record, enabled or not, since a call or approval made while it was enabled keeps its name.
    One query, whatever the number of tenants and tools."""
    rows = list(Tenant.objects.filter(members=user).values_list("slug", "remote_tools__name"))
    remote = {name for _slug, name in rows if name is not None}
    return FilterChoices(
        tenants=sorted({slug for slug, _name in rows}),
        tools=sorted({*registry.names(), *remote}),
    )


def tool_catalogues(*, user: User) -> list[tuple[Tenant, list[catalogue.Entry]]]:
    """Each of the user's tenants, by slug, with the tools it may use now
    (:func:`toolcalls.catalogue.entries`, what ``GET /api/v1/tools`` lists). Queries: one for
    the tenants, and per tenant those of :func:`~toolcalls.catalogue.entries`."""
    tenants = Tenant.objects.filter(members=user).order_by("slug")
    return [(tenant, catalogue.entries(tenant)) for tenant in tenants]


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
    """The operation with its turns (and their calls), its agent revision, the operation it
    follows up or forks, and its follow-ups (oldest first; ID and state) prefetched, and
    ``requested_by_name`` (:func:`principal_names`); raises ``Operation.DoesNotExist`` when it
    is not in one of the user's tenants."""
    calls = ToolCall.objects.order_by("position")
    turns = ModelTurn.objects.defer("request_frame", "request_items", "reply").order_by("index")
    follow_ups = Operation.objects.only("public_id", "state", "parent_id").order_by("created_at")
    rows = (
        operations_visible(user=user)
        .select_related("tenant", "agent_revision__profile", "parent", "forked_from")
        .defer("conversation", "parent__conversation", "forked_from__conversation")
        .prefetch_related(
            Prefetch("turns", queryset=turns),
            Prefetch("turns__calls", queryset=calls),
            Prefetch("follow_ups", queryset=follow_ups),
        )
    )
    return principal_names(rows, requested_by_name="requested_by").get(public_id=public_id)


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


@dataclass(frozen=True)
class OperationFilters:
    """Filters of the operations list; empty values filter nothing. ``created_from`` and
    ``created_to`` bound ``created_at`` (from inclusive, to exclusive)."""

    state: str = ""
    tool: str = ""
    customer: str = ""
    agent: str = ""
    created_from: datetime | None = None
    created_to: datetime | None = None


#: The operations list's order (and the search's): the newest first.
NEWEST_FIRST = (Key("created_at", descending=True), Key("pk", descending=True))
#: Operations per page of the list.
OPERATIONS_PAGE_SIZE = 50


def operations_list(
    *, user: User, filters: OperationFilters, cursor: str | None = None
) -> Page[Operation]:
    """One page of the user's tenants' operations, newest first, keyset-paged on
    ``(created_at, id)`` over the indexes ``operation_tenant_created``, ``…_state`` and
    ``…_subject``. A tool filter keeps operations with at least one call of that tool. Each row
    carries ``requested_by_name`` (:func:`principal_names`)."""
    related = ("tenant", "agent_revision__profile")
    rows = operations_visible(user=user).select_related(*related)
    rows = principal_names(rows.only(*_LISTED), requested_by_name="requested_by")
    if filters.state:
        rows = rows.filter(state=filters.state)
    if filters.customer:
        rows = rows.filter(subject_ref=filters.customer)
    if filters.agent:
        name, _, number = filters.agent.partition("@")
        rows = rows.filter(agent_revision__profile__name=name)
        if number:  # as the API writes it: ``01``, or an Arabic-Indic one, is no revision
            wanted = int(number) if REVISION.fullmatch(number) else -1
            rows = rows.filter(agent_revision__number=wanted)
    if filters.tool:
        calls = ToolCall.objects.filter(operation_id=OuterRef("pk"), tool_name=filters.tool)
        rows = rows.filter(Exists(calls))
    if filters.created_from:
        rows = rows.filter(created_at__gte=filters.created_from)
    if filters.created_to:
        rows = rows.filter(created_at__lt=filters.created_to)
    return keyset_page(rows, keys=NEWEST_FIRST, cursor=cursor, size=OPERATIONS_PAGE_SIZE)


_LISTED = (
    "public_id",
    "tenant__slug",
    "subject_ref",
    "agent_revision__number",
    "agent_revision__profile__name",
    "state",
    "terminal_reason",
    "tool_call_count",
    "created_at",
    "updated_at",
)


#: Call states that end a call without its effect, as the console words them in a badge.
_NOT_DONE = {
    CallState.DENIED: "after a denial",
    CallState.EXPIRED: "after an expired approval",
}


@dataclass(frozen=True)
class Outcome:
    """What an operation did, for the top of its page: ``badge`` (the state, qualified when a
    COMPLETED operation's effect did not happen: "COMPLETED, submit_refund failed" or
    "COMPLETED after a denial"), ``tone`` (``ok``, ``warn`` or ``bad``, for its colour) and
    ``effects``: its calls with side effects that settled, in order."""

    badge: str
    tone: str
    effects: list[ToolCall]


#: What only a call parked for a decision ends with.
_DECIDED = {CallState.DENIED, CallState.EXPIRED}
_DECISION_CODES = {ErrorCode.APPROVAL_STALE, ErrorCode.APPROVAL_EXPIRED}


def _side_effect(operation: Operation, call: ToolCall) -> bool:
    """Whether ``call`` was a side effect: as its tool's spec says, or, for a tool the tenant
    no longer has (a remote tool disabled since), as the call shows it: a key reserved for its
    effect, or a decision asked for."""
    spec = catalogue.tool_spec(operation, call.tool_name)
    if spec is not None:
        return spec.has_side_effects
    decided = call.state in _DECIDED or call.error_code in _DECISION_CODES
    return bool(call.idempotency_key) or decided


def operation_outcome(*, operation: Operation, turns: list[dict[str, Any]]) -> Outcome:
    """The outcome of ``operation`` from its turns as :func:`operation_turns_with_cost` gives
    them (no query)."""
    calls = [call for item in turns for call in item["calls"]]
    effects = [
        call for call in calls if call.model_result is not None and _side_effect(operation, call)
    ]
    state = operation.state
    if state != OperationState.COMPLETED:
        tone = "warn" if state in OPERATION_ACTIVE or state == OperationState.ESCALATED else "bad"
        return Outcome(badge=state, tone=tone, effects=effects)
    failed = [c for c in effects if c.state not in _NOT_DONE and is_error(c.model_result or {})]
    if failed:
        return Outcome(badge=f"{state}, {failed[-1].tool_name} failed", tone="bad", effects=effects)
    for call in effects:
        if call.state in _NOT_DONE:
            return Outcome(badge=f"{state} {_NOT_DONE[call.state]}", tone="warn", effects=effects)
    return Outcome(badge=state, tone="ok", effects=effects)
