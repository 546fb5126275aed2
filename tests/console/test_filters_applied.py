"""The console's lists (the approval queue, the decisions history, the operations list) apply
every filter they understand: one not understood is ignored on its own, named by its label and
shown blank, never taking the others with it. Their Tool filters offer each tool the viewer's
tenants have had, remote tools (enabled or not) included, at one query per page."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from approvals.forms import QueueFilterForm
from tests.factories import OperationFactory, TenantFactory, ToolCallFactory, pending_approval
from toolcalls.actors import Actor
from toolcalls.console.forms import OperationFilterForm
from toolcalls.models import Tenant
from toolcalls.remote import services as remote
from toolcalls.remote.models import RemoteServer, RemoteTool

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

IGNORED = "Some filters were not understood and are ignored: "
ADMIN = Actor.system("test")
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


def _page(name: str, query: dict[str, str], username: str = "operator") -> str:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    response = client.get(reverse(name), query)
    assert response.status_code == 200
    return response.content.decode()


def _input(page: str, name: str) -> str:
    """The ``<input>`` or ``<select>`` (with its options) named ``name``."""
    found = re.search(rf'<(input|select)[^>]*name="{name}"[^>]*>(.*?</select>)?', page, re.S)
    assert found, name
    return found.group(0)


def _tag(page: str, name: str) -> str:
    """The ``<input>`` named ``name``, alone."""
    found = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
    assert found, name
    return found.group(0)


def _selected(page: str, name: str) -> list[str]:
    return re.findall(r'<option value="([^"]*)"[^>]*selected', _input(page, name))


def _decided(tenant: Tenant, state: str, by: User, **fields: Any) -> Any:
    now = datetime.now(UTC)
    return pending_approval(tenant, state=state, decided_by=by, decided_at=now, **fields)


def test_the_queue_applies_the_risk_when_the_amount_is_not_understood(demo: Any) -> None:
    read = pending_approval(demo.tenant, risk="read", amount_cents=100)
    write = pending_approval(demo.tenant, risk="write", amount_cents=100)
    page = _page("approvals:queue", {"risk": "read", "amount_min": "abc"})
    assert read.public_id in page and write.public_id not in page
    assert f"{IGNORED}Amount from." in page
    assert _selected(page, "risk") == ["read"]
    assert 'value="abc"' not in _input(page, "amount_min")  # shown as not applied


def test_the_queue_ignores_each_filter_not_understood_on_its_own(demo: Any) -> None:
    small = pending_approval(demo.tenant, risk="write", amount_cents=500)
    large = pending_approval(demo.tenant, risk="write", amount_cents=90000)
    query = {"tool": "nothing_of_ours", "amount_min": "100", "expiring": "maybe"}
    page = _page("approvals:queue", query)
    assert large.public_id in page and small.public_id not in page
    assert f"{IGNORED}Tool, Expiring within 15 minutes." in page
    assert _selected(page, "tool") == [""] and " checked" not in _input(page, "expiring")
    assert 'value="100"' in _input(page, "amount_min")


def test_the_decisions_history_applies_decided_by_when_the_state_is_not_understood(
    demo: Any,
) -> None:
    operator, support = User.objects.get(username="operator"), User.objects.get(username="support")
    mine = _decided(demo.tenant, "APPROVED", operator)
    theirs = _decided(demo.tenant, "DENIED", support)
    page = _page("approvals:decisions", {"state": "bogus", "decided_by": "operator"})
    assert mine.public_id in page and theirs.public_id not in page
    assert f"{IGNORED}Decision." in page
    assert _selected(page, "state") == [""]
    assert 'value="operator"' in _input(page, "decided_by")


@pytest.mark.parametrize("typed", ["operator", "OPERATOR", "Operator", "user:OPERATOR"])
def test_decided_by_matches_the_name_in_any_case(demo: Any, typed: str) -> None:
    """Usernames are case-sensitive for logging in; a filter by name is not (it matched only
    the name as stored: "Operator" found nothing)."""
    operator, support = User.objects.get(username="operator"), User.objects.get(username="support")
    mine = _decided(demo.tenant, "APPROVED", operator)
    theirs = _decided(demo.tenant, "DENIED", support)
    page = _page("approvals:decisions", {"decided_by": typed})
    assert mine.public_id in page and theirs.public_id not in page


@pytest.mark.parametrize("typed", ["requester", "REQUESTER", "user:Requester"])
def test_requested_by_matches_the_name_in_any_case(demo: Any, typed: str) -> None:
    requester, support = (User.objects.get(username=name) for name in ("requester", "support"))
    theirs = pending_approval(demo.tenant, requested_by=requester)
    other = pending_approval(demo.tenant, requested_by=support)
    page = _page("approvals:queue", {"requester": typed})
    assert theirs.public_id in page and other.public_id not in page


def test_the_operations_list_applies_the_customer_when_the_date_is_not_understood(
    demo: Any,
) -> None:
    wanted = OperationFactory.create(tenant=demo.tenant, subject_ref="cus_wanted")
    other = OperationFactory.create(tenant=demo.tenant, subject_ref="cus_other")
    query = {"customer": "cus_wanted", "created_from": "not a day", "state": "NOPE"}
    page = _page("operations:list", query, username="support")
    assert wanted.public_id in page and other.public_id not in page
    assert f"{IGNORED}State, Created from." in page
    assert 'value="not a day"' not in _input(page, "created_from")
    assert _selected(page, "state") == [""]


def _remote_tools(tenant: Tenant, server_name: str, *names: str) -> RemoteServer:
    """An HTTP tool server of ``tenant`` with ``names`` registered; the first is enabled, the
    others are left disabled (as a tool an administrator disabled after it was used)."""
    form = remote.ServerForm(name=server_name, kind="http", signing_secret="secret")
    server = remote.remote_server_register(tenant=tenant, form=form, actor=ADMIN)
    for index, name in enumerate(names):
        tool = remote.HttpToolForm(name, name, SCHEMA, url=f"http://127.0.0.1:9/{name}")
        registered = remote.remote_http_tool_register(server_pk=server.pk, form=tool, actor=ADMIN)
        if index == 0:
            review = remote.Review(risk="read", timeout_ms=2000, approval="always")
            remote.remote_tool_enable(tool_pk=registered.pk, review=review, actor=ADMIN)
    return server


@pytest.fixture
def shop(demo: Any) -> Any:
    """The demo tenant with remote tools ``shop__submit_refund`` (enabled) and ``shop__void``
    (disabled), and another tenant with ``theirs__secret``."""
    _remote_tools(demo.tenant, "shop", "submit_refund", "void")
    assert not RemoteTool.objects.get(name="shop__void").enabled
    _remote_tools(TenantFactory.create(slug="globex"), "theirs", "secret")
    return demo


@pytest.mark.parametrize("tool", ["shop__submit_refund", "shop__void"])
def test_the_queue_filters_by_a_remote_tool(shop: Any, tool: str) -> None:
    theirs = pending_approval(shop.tenant, tool_name=tool)
    local = pending_approval(shop.tenant)
    page = _page("approvals:queue", {"tool": tool})
    assert theirs.public_id in page and local.public_id not in page
    assert IGNORED not in page and _selected(page, "tool") == [tool]


def test_the_decisions_history_filters_by_a_disabled_remote_tool(shop: Any) -> None:
    operator = User.objects.get(username="operator")
    voided = _decided(shop.tenant, "APPROVED", operator, tool_name="shop__void")
    local = _decided(shop.tenant, "APPROVED", operator)
    page = _page("approvals:decisions", {"tool": "shop__void"})
    assert voided.public_id in page and local.public_id not in page
    assert IGNORED not in page and _selected(page, "tool") == ["shop__void"]


def test_the_operations_list_filters_by_a_remote_tool(shop: Any) -> None:
    used = OperationFactory.create(tenant=shop.tenant)
    ToolCallFactory.create(turn__operation=used, tool_name="shop__submit_refund")
    other = OperationFactory.create(tenant=shop.tenant)
    page = _page("operations:list", {"tool": "shop__submit_refund"}, username="support")
    assert used.public_id in page and other.public_id not in page
    assert IGNORED not in page and _selected(page, "tool") == ["shop__submit_refund"]


@pytest.mark.parametrize("name", ["approvals:queue", "approvals:decisions", "operations:list"])
def test_the_tool_filters_offer_every_tool_of_the_viewers_tenants_only(
    shop: Any, name: str
) -> None:
    tools = _input(_page(name, {}), "tool")
    offered = re.findall(r'<option value="([^"]+)"', tools)
    assert {"get_order", "submit_refund", "shop__submit_refund", "shop__void"} <= set(offered)
    assert "theirs__secret" not in offered
    assert offered == sorted(offered)
    assert IGNORED in _page(name, {"tool": "theirs__secret"})


@pytest.mark.parametrize(
    ("name", "queries"),
    [("approvals:queue", 9), ("approvals:decisions", 7), ("operations:list", 7)],
)
def test_the_tool_choices_cost_one_query_whatever_the_number_of_tools(
    shop: Any, name: str, queries: int, django_assert_num_queries: Any
) -> None:
    """Session, user, the tenants with their remote tools, the rows (with the tenants' IDs),
    the pending count (with the tenants' IDs); the queue asks for the permission to decide too
    (the user's and their groups')."""
    client = Client()
    assert client.login(username="operator", password="operator-demo-pass")
    with django_assert_num_queries(queries):
        client.get(reverse(name))
    _remote_tools(shop.tenant, "more", "one", "two", "three")
    with django_assert_num_queries(queries):
        page = client.get(reverse(name)).content.decode()
    assert 'value="more__three"' in page


def test_the_next_pages_carry_only_the_filters_applied() -> None:
    query = {"customer": "cus_1001", "created_from": "not a day", "tool": "nothing_of_ours"}
    form = OperationFilterForm(query, tools=["get_order"])
    assert form.query() == {"customer": "cus_1001"}
    queue = QueueFilterForm({"risk": "read", "amount_min": "abc"}, tools=[], tenants=[])
    assert queue.filters().query() == {"risk": "read"}


def test_an_amount_range_the_wrong_way_round_says_why_and_applies_the_maximum(
    demo: Any,
) -> None:
    """Both bounds applied would match nothing, with only "nothing is waiting" to say so: the
    minimum is ignored as a filter not understood is, shown blank, and the page says why."""
    low = pending_approval(demo.tenant, amount_cents=1000)
    high = pending_approval(demo.tenant, amount_cents=7500)
    page = _page("approvals:queue", {"amount_min": "80", "amount_max": "50.00"})
    assert low.public_id in page and high.public_id not in page
    assert "Amount from is ignored: the minimum is above the maximum." in page
    assert IGNORED not in page and "Nothing is waiting" not in page
    minimum, maximum = (_tag(page, name) for name in ("amount_min", "amount_max"))
    assert "value=" not in minimum and 'aria-invalid="true"' in minimum
    assert 'value="50.00"' in maximum
    query = QueueFilterForm({"amount_min": "80", "amount_max": "50"}, tools=[], tenants=[])
    assert query.filters().query() == {"amount_max": "50.00"}
    same = _page("approvals:queue", {"amount_min": "50", "amount_max": "50"})
    assert "is ignored" not in same and "Nothing is waiting for a decision with these" in same
