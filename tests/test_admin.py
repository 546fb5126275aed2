"""The support admin: registration, read-only rows, tenant scoping, search by ID, cheap lists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db import connection, models
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import ApprovalRequest
from tests.factories import (
    ApprovalRequestFactory,
    ModelTurnFactory,
    OperationFactory,
    TenantFactory,
    ToolCallFactory,
    UserFactory,
)
from toolcalls.actors import Actor
from toolcalls.admin_base import CappedCountPaginator
from toolcalls.demo.models import Fault, LedgerEntry, Order, RefundDraft
from toolcalls.models import (
    AuditEvent,
    IdempotencyRecord,
    ModelTurn,
    Operation,
    ReplayScript,
    Tenant,
    ToolCall,
)
from toolcalls.services.audit import audit_record
from toolcalls.states import AuditKind

pytestmark = pytest.mark.django_db

MODELS: list[type[models.Model]] = [
    Tenant,
    ReplayScript,
    Operation,
    ModelTurn,
    ToolCall,
    IdempotencyRecord,
    AuditEvent,
    ApprovalRequest,
    Order,
    RefundDraft,
    LedgerEntry,
    Fault,
]
READ_ONLY = [
    ReplayScript,
    Operation,
    ModelTurn,
    ToolCall,
    IdempotencyRecord,
    AuditEvent,
    ApprovalRequest,
    RefundDraft,
    LedgerEntry,
]
LARGE_TABLES = [Operation, ModelTurn, ToolCall, AuditEvent, ApprovalRequest, IdempotencyRecord]
#: Every JSON or large text column of the engine: no changelist may select one.
HEAVY_COLUMNS = [
    "conversation",
    "tool_names",
    "budgets",
    "calls_per_tool",
    "request_frame",
    "request_items",
    "reply",
    "arguments",
    "raw_arguments",
    "model_result",
    "protected_audit",
    "details",
    "replies",
    "canonical_arguments",
]
HOSTILE = "<script>alert(1)</script>"


@dataclass
class Rows:
    """One of every row, all belonging to one tenant."""

    tenant: Tenant
    script: ReplayScript
    operation: Operation
    turn: ModelTurn
    call: ToolCall
    approval: ApprovalRequest
    record: IdempotencyRecord
    event: AuditEvent
    order: Order
    draft: RefundDraft
    entry: LedgerEntry

    def of(self, model: type[models.Model]) -> models.Model:
        return next(row for row in vars(self).values() if isinstance(row, model))


def tenant_rows(slug: str) -> Rows:
    tenant = TenantFactory.create(slug=slug)
    script = ReplayScript.objects.create(
        name=f"{slug} refund", family="openai_responses", model="gpt-test", replies=[{"n": 1}]
    )
    operation = OperationFactory.create(
        tenant=tenant,
        replay_script=script,
        subject_ref=f"cus_{slug}",
        conversation=[{"role": "user", "content": HOSTILE}],
    )
    turn = ModelTurnFactory.create(operation=operation, response_id=f"resp_{slug}")
    call = ToolCallFactory.create(
        turn=turn,
        tool_name="submit_refund",
        provider_call_id=f"call_provider_{slug}",
        idempotency_key=f"refund:{slug}:1",
        raw_arguments='{"order_id": "ORD-1001"}',
        model_result={"ok": True},
    )
    approval = ApprovalRequestFactory.create(call=call)
    record = IdempotencyRecord.objects.create(
        tenant=tenant,
        tool_name="submit_refund",
        key=f"refund:{slug}:1",
        request_sha256="0" * 64,
        call=call,
        model_result={"ok": True},
    )
    event = audit_record(
        operation=operation,
        kind=AuditKind.CALL_PROPOSED,
        actor=Actor.system("test"),
        call=call,
        details={"n": 1},
    )
    order = Order.objects.create(
        tenant_ref=slug,
        order_id=f"ORD-{slug}",
        customer_ref="cus_1001",
        description="Electric kettle",
        total_cents=3499,
    )
    draft = RefundDraft.objects.create(
        draft_id=f"RD-{slug}", order=order, amount_cents=1000, reason="damaged"
    )
    entry = LedgerEntry.objects.create(
        refund_id=f"RF-{slug}",
        order=order,
        draft=draft,
        amount_cents=1000,
        idempotency_key=f"refund:{slug}:1",
        operation_ref=operation.public_id,
        call_ref=call.provider_call_id,
    )
    return Rows(tenant, script, operation, turn, call, approval, record, event, order, draft, entry)


@pytest.fixture
def a() -> Rows:
    return tenant_rows("alpha")


@pytest.fixture
def b() -> Rows:
    return tenant_rows("bravo")


@pytest.fixture
def fault() -> Fault:
    return Fault.objects.create(point="submit_refund.before_commit", delay_ms=10)


@pytest.fixture
def superuser() -> Client:
    client = Client()
    client.force_login(UserFactory.create(username="root", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def staff(a: Rows) -> Client:
    """A staff member of tenant ``a`` with every view permission (and Tenant's change one)."""
    user: User = UserFactory.create(username="support-alpha", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            codename__startswith="view_",
            content_type__app_label__in=["toolcalls", "approvals", "demo"],
        ),
        Permission.objects.get(codename="change_tenant"),
    )
    a.tenant.members.add(user)
    client = Client()
    client.force_login(user)
    return client


def url(model: type[models.Model], view: str, *args: object) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


def change_url(row: models.Model) -> str:
    return url(type(row), "change", row.pk)


def label(model: type[models.Model]) -> str:
    return model.__name__


def test_every_model_is_registered() -> None:
    assert all(admin.site.is_registered(model) for model in MODELS)


@pytest.mark.parametrize("model", MODELS, ids=label)
def test_superuser_pages_render(superuser: Client, a: Rows, fault: Fault, model: Any) -> None:
    row = fault if model is Fault else a.of(model)
    listing = superuser.get(url(model, "changelist"))
    assert listing.status_code == 200
    assert change_url(row) in listing.content.decode()
    assert superuser.get(change_url(row)).status_code == 200


@pytest.mark.parametrize("model", [m for m in MODELS if m is not Fault], ids=label)
def test_staff_see_only_their_tenants_rows(staff: Client, a: Rows, b: Rows, model: Any) -> None:
    listing = staff.get(url(model, "changelist"))
    assert listing.status_code == 200
    assert change_url(a.of(model)) in listing.content.decode()
    assert change_url(b.of(model)) not in listing.content.decode()
    assert staff.get(change_url(a.of(model))).status_code == 200
    other = staff.get(change_url(b.of(model)))
    assert other.status_code in (302, 404)
    if other.status_code == 302:
        assert other["Location"] == reverse("admin:index")


def test_staff_cannot_see_another_tenants_operation(staff: Client, a: Rows, b: Rows) -> None:
    page = staff.get(url(Operation, "changelist")).content.decode()
    assert a.operation.public_id in page
    assert b.operation.public_id not in page
    searched = staff.get(url(Operation, "changelist"), {"q": b.operation.public_id})
    assert change_url(b.operation) not in searched.content.decode()
    assert "0 results" in searched.content.decode()
    assert staff.get(change_url(b.operation)).status_code in (302, 404)


def test_faults_are_for_superusers_only(staff: Client, fault: Fault) -> None:
    assert staff.get(url(Fault, "changelist")).status_code == 403
    assert staff.get(change_url(fault)).status_code == 403


@pytest.mark.parametrize("model", READ_ONLY, ids=label)
def test_read_only_models_refuse_add_change_delete(
    superuser: Client, staff: Client, a: Rows, model: Any
) -> None:
    row = a.of(model)
    before = {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}
    for client in (superuser, staff):
        assert client.get(url(model, "add")).status_code == 403
        assert client.post(url(model, "add"), {}).status_code == 403
        assert client.post(change_url(row), {"state": "COMPLETED"}).status_code == 403
        assert client.get(url(model, "delete", row.pk)).status_code == 403
        assert client.post(url(model, "delete", row.pk), {"post": "yes"}).status_code == 403
        page = client.get(change_url(row)).content.decode()
        assert 'name="_save"' not in page
        assert "delete_selected" not in client.get(url(model, "changelist")).content.decode()
    row.refresh_from_db()
    assert {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields} == before


def test_audit_event_cannot_be_rewritten(superuser: Client, a: Rows) -> None:
    event = a.event
    response = superuser.post(change_url(event), {"kind": "tampered", "actor": "mallory"})
    assert response.status_code == 403
    event.refresh_from_db()
    assert (event.kind, event.actor) == ("call.proposed", "system:test")
    assert superuser.get(url(AuditEvent, "delete", event.pk)).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_superusers_edit_tenants_orders_and_faults(superuser: Client, a: Rows) -> None:
    response = superuser.post(
        change_url(a.tenant), {"slug": "alpha", "name": "Alpha Renamed", "is_active": "on"}
    )
    assert response.status_code == 302
    a.tenant.refresh_from_db()
    assert a.tenant.name == "Alpha Renamed"
    assert superuser.get(url(Order, "add")).status_code == 200
    response = superuser.post(
        url(Fault, "add"), {"point": "get_order.before", "delay_ms": "5", "times": "1"}
    )
    assert response.status_code == 302
    assert Fault.objects.filter(point="get_order.before").exists()
    # A tenant is protected by every row it owns: deactivated, never deleted.
    assert superuser.get(url(Tenant, "delete", a.tenant.pk)).status_code == 403


def test_staff_cannot_edit_even_with_the_permission(staff: Client, a: Rows) -> None:
    response = staff.post(change_url(a.tenant), {"slug": "alpha", "name": "Hijacked"})
    assert response.status_code == 403
    a.tenant.refresh_from_db()
    assert a.tenant.name != "Hijacked"
    assert staff.get(url(Order, "add")).status_code == 403


SEARCHES: list[tuple[str, type[models.Model], Callable[[Rows], str]]] = [
    ("operation by op id", Operation, lambda r: r.operation.public_id),
    ("operation by subject", Operation, lambda r: r.operation.subject_ref),
    ("turn by response id", ModelTurn, lambda r: r.turn.response_id),
    ("turn by op id", ModelTurn, lambda r: r.operation.public_id),
    ("call by call id", ToolCall, lambda r: r.call.public_id),
    ("call by provider call id", ToolCall, lambda r: r.call.provider_call_id),
    ("call by response id", ToolCall, lambda r: r.call.response_id),
    ("call by op id", ToolCall, lambda r: r.operation.public_id),
    ("call by approval id", ToolCall, lambda r: r.approval.public_id),
    ("call by idempotency key", ToolCall, lambda r: r.call.idempotency_key),
    ("approval by approval id", ApprovalRequest, lambda r: r.approval.public_id),
    ("approval by op id", ApprovalRequest, lambda r: r.operation.public_id),
    ("approval by call id", ApprovalRequest, lambda r: r.call.public_id),
    ("approval by provider call id", ApprovalRequest, lambda r: r.call.provider_call_id),
    ("record by idempotency key", IdempotencyRecord, lambda r: r.record.key),
    ("record by call id", IdempotencyRecord, lambda r: r.call.public_id),
    ("record by op id", IdempotencyRecord, lambda r: r.operation.public_id),
    ("event by op id", AuditEvent, lambda r: r.operation.public_id),
    ("event by call id", AuditEvent, lambda r: r.call.public_id),
    ("event by provider call id", AuditEvent, lambda r: r.call.provider_call_id),
    ("ledger by op id", LedgerEntry, lambda r: r.operation.public_id),
    ("ledger by idempotency key", LedgerEntry, lambda r: r.entry.idempotency_key),
]


@pytest.mark.parametrize(("model", "term"), [s[1:] for s in SEARCHES], ids=[s[0] for s in SEARCHES])
def test_search_by_id(superuser: Client, a: Rows, b: Rows, model: Any, term: Any) -> None:
    response = superuser.get(url(model, "changelist"), {"q": f"  {term(a)} "})
    assert response.status_code == 200
    assert change_url(a.of(model)) in response.content.decode()
    assert change_url(b.of(model)) not in response.content.decode()


def test_operation_detail_shows_json_indented_and_escaped(superuser: Client, a: Rows) -> None:
    page = superuser.get(change_url(a.operation)).content.decode()
    assert "<pre>[\n  {\n    &quot;role&quot;: &quot;user&quot;," in page
    assert "&quot;content&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in page
    assert HOSTILE not in page


@pytest.mark.parametrize("who", ["superuser", "staff"])
def test_operation_changelist_runs_fixed_queries_without_conversation(
    request: pytest.FixtureRequest, django_assert_max_num_queries: Any, a: Rows, who: str
) -> None:
    client: Client = request.getfixturevalue(who)
    OperationFactory.create_batch(4, tenant=a.tenant)
    with CaptureQueriesContext(connection) as few:
        page = client.get(url(Operation, "changelist")).content.decode()
    assert page.count('class="field-public_id"') == 5
    OperationFactory.create_batch(30, tenant=a.tenant)
    with django_assert_max_num_queries(len(few.captured_queries)) as many:
        page = client.get(url(Operation, "changelist")).content.decode()
    assert page.count('class="field-public_id"') == 35
    assert len(few.captured_queries) <= 10
    for query in [*few.captured_queries, *many.captured_queries]:
        assert '"conversation"' not in query["sql"]


@pytest.mark.parametrize("model", MODELS, ids=label)
def test_changelist_queries_do_not_grow_with_rows(
    superuser: Client, django_assert_max_num_queries: Any, a: Rows, fault: Fault, model: Any
) -> None:
    with CaptureQueriesContext(connection) as one_tenant:
        assert superuser.get(url(model, "changelist")).status_code == 200
    for slug in ("charlie", "delta", "echo", "foxtrot"):
        tenant_rows(slug)
        Fault.objects.create(point=f"{slug}.point")
    with django_assert_max_num_queries(len(one_tenant.captured_queries)):
        assert superuser.get(url(model, "changelist")).status_code == 200


@pytest.mark.parametrize("model", LARGE_TABLES, ids=label)
def test_large_changelists_select_no_heavy_column_and_never_count_everything(
    superuser: Client, staff: Client, a: Rows, model: Any
) -> None:
    for client in (superuser, staff):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url(model, "changelist")).status_code == 200
        for query in queries.captured_queries:
            sql = query["sql"]
            assert not [column for column in HEAVY_COLUMNS if f'."{column}"' in sql], sql
            if "COUNT(" in sql:
                assert "LIMIT" in sql, sql


def test_capped_paginator_counts_at_most_its_cap() -> None:
    OperationFactory.create_batch(5)

    class SmallCap(CappedCountPaginator):
        count_cap = 3

    assert SmallCap(Operation.objects.order_by("-pk"), 2).count == 3
    assert CappedCountPaginator(Operation.objects.order_by("-pk"), 2).count == 5
