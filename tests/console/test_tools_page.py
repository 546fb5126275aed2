"""The console's Tools page: each of the viewer's tenants with the tools it may use (what
``GET /api/v1/tools`` lists): where each comes from, and the tenant's overrides beside the tool's
own values; other tenants' catalogues, and disabled tools, are not shown; its queries do not
grow with the number of tools."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import TenantFactory, UserFactory
from tests.remote.conftest import ServerProcess, mcp_url
from toolcalls.actors import Actor
from toolcalls.models import Tenant
from toolcalls.remote import services as remote
from toolcalls.remote.models import RemoteServer
from toolcalls.services.catalogue import tenant_tool_set

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

ADMIN = Actor.system("test")
SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}
URL = reverse("console-tools")


def _client(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=f"{username}-demo-pass")
    return client


def _page(client: Client) -> str:
    response = client.get(URL)
    assert response.status_code == 200
    return response.content.decode()


def _http_tools(tenant: Tenant, *names: str) -> RemoteServer:
    """An HTTP tool server of ``tenant`` with ``names`` registered and enabled."""
    form = remote.ServerForm(name="ledger", kind="http", signing_secret="secret")
    server = remote.remote_server_register(tenant=tenant, form=form, actor=ADMIN)
    _http_add(server, *names)
    return server


def _http_add(server: RemoteServer, *names: str) -> None:
    """Register and enable read tools ``names`` on HTTP server ``server``."""
    for name in names:
        tool = remote.HttpToolForm(
            name, f"{name} a ledger", SCHEMA, url=f"http://127.0.0.1:9/{name}"
        )
        registered = remote.remote_http_tool_register(server_pk=server.pk, form=tool, actor=ADMIN)
        _enable(registered.pk)


def _enable(tool_pk: int) -> None:
    review = remote.Review(risk="read", timeout_ms=2000, approval="never")
    remote.remote_tool_enable(tool_pk=tool_pk, review=review, actor=ADMIN)


def _override(tenant: Tenant, tool_name: str, **settings: Any) -> None:
    """Set ``tenant``'s settings of ``tool_name``: enabled, no overrides, but ``settings``."""
    values = {"enabled": True, "max_calls": None, "approval": "", "approval_threshold": None}
    tenant_tool_set(tenant=tenant, tool_name=tool_name, actor=ADMIN, **{**values, **settings})


@pytest.fixture
def mcp_server(tmp_path: Path) -> Iterator[str]:
    """An MCP server on 127.0.0.1 serving one tool, ``lookup``; yields its URL."""
    script = tmp_path / "mcp-script.json"
    tool = {"name": "lookup", "description": "Look a parcel up", "inputSchema": SCHEMA}
    script.write_text(json.dumps({"tools": [tool], "calls": {}}))
    fixture = str(Path(__file__).parents[1] / "remote" / "mcp_fixture_server.py")
    process = ServerProcess([sys.executable, fixture, "{port}", str(script)]).start()
    yield mcp_url(process)
    process.stop()


def test_the_page_shows_each_tool_where_it_comes_from_and_its_overrides(
    demo: Any, mcp_server: str
) -> None:
    _override(demo.tenant, "submit_refund", max_calls=2, approval="always")
    _http_tools(demo.tenant, "pay")
    form = remote.ServerForm(name="parcels", kind="mcp", url=mcp_server)
    mcp = remote.remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    _enable(mcp.tools.get().pk)

    page = _page(_client("operator"))
    section = page[page.index('data-testid="catalogue-acme"') :]
    submit = section[section.index('data-testid="tool-submit_refund"') :].split("</tr>")[0]
    assert "<td>irreversible</td>" in submit and "<td>local</td>" in submit
    assert "<td>the operation's budget</td>" in submit  # the tool's own: none
    assert "<td>2 <small>(tenant override)</small></td>" in submit
    own = "approval when amount_cents &gt; threshold (cents); threshold 2500 cents"
    assert f"<td>{own}</td>" in submit
    assert "always <small>(tenant override: every call waits for a human)</small>" in submit
    pay = section[section.index('data-testid="tool-ledger__pay"') :].split("</tr>")[0]
    assert "HTTP tools <code>ledger</code>" in pay and "pay a ledger" in pay
    lookup = section[section.index('data-testid="tool-parcels__lookup"') :].split("</tr>")[0]
    assert "MCP server <code>parcels</code>" in lookup and "Look a parcel up" in lookup
    assert 'href="/console/tools/">Tools</a>' in page


def test_a_lower_threshold_is_shown_in_force_beside_the_tools_own(demo: Any) -> None:
    _override(demo.tenant, "submit_refund", approval="threshold", approval_threshold=1000)
    page = _page(_client("operator"))
    submit = page[page.index('data-testid="tool-submit_refund"') :].split("</tr>")[0]
    assert "threshold 2500 cents</td>" in submit
    assert "threshold 1000 cents <small>(tenant override: above a lower threshold" in submit


def test_other_tenants_tools_and_disabled_tools_are_not_shown(demo: Any) -> None:
    other = TenantFactory.create(slug="globex", name="Globex")
    _http_tools(other, "theirs")
    _override(demo.tenant, "create_refund_draft", enabled=False)
    page = _page(_client("operator"))
    assert 'data-testid="tool-get_order"' in page
    assert 'data-testid="tool-create_refund_draft"' not in page
    assert "Globex" not in page and "ledger__theirs" not in page

    member = UserFactory.create(username="globex-staff")
    other.members.add(member)
    client = Client()
    client.force_login(member)
    theirs = _page(client)
    assert 'data-testid="tool-ledger__theirs"' in theirs
    assert 'data-testid="catalogue-acme"' not in theirs and "create_refund_draft" in theirs


def test_the_page_needs_a_login() -> None:
    response = Client().get(URL)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={URL}"


def test_the_query_count_does_not_grow_with_the_tools(
    demo: Any, django_assert_num_queries: Any
) -> None:
    client = _client("operator")
    server = _http_tools(demo.tenant, "pay")
    with django_assert_num_queries(QUERIES):
        _page(client)
    _http_add(server, "refund", "void", "hold")
    _override(demo.tenant, "get_order", max_calls=3)  # a new catalogue revision: rows read again
    with django_assert_num_queries(QUERIES):
        page = _page(client)
    assert 'data-testid="tool-ledger__hold"' in page


#: Session, user, the pending count, the tenants, the demo tenant's catalogue rows (changed
#: since the last read) and its remote tools.
QUERIES = 7
