"""The admin's remote tool pages: register a server, review and enable a tool, register an
HTTP tool; staff see only their tenants' servers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import UserFactory
from tests.remote.conftest import ScriptedMcp, free_port
from toolcalls import catalogue
from toolcalls.models import Tenant
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


@pytest.fixture
def root() -> Client:
    client = Client()
    client.force_login(UserFactory.create(username="root", is_staff=True, is_superuser=True))
    return client


def test_a_superuser_registers_a_server_and_enables_a_tool(
    demo: Any, root: Client, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([{"name": "lookup", "inputSchema": SCHEMA}])
    add = reverse("admin:remote_remoteserver_add")
    assert root.get(add).status_code == 200
    down = {"tenant": demo.tenant.pk, "name": "shop", "kind": "mcp"}
    page = root.post(add, {**down, "url": f"http://127.0.0.1:{free_port()}/mcp"})
    assert page.status_code == 200 and "cannot be used" in page.content.decode()
    response = root.post(add, {**down, "url": scripted_mcp.url, "headers": '{"X-Key": "k"}'})
    assert response.status_code == 302, response.content.decode()[:2000]
    tool = RemoteTool.objects.get()
    change = reverse("admin:remote_remotetool_change", args=[tool.pk])
    assert "lookup" in root.get(change).content.decode()
    review = {"enabled": "on", "risk": "write", "timeout_ms": 2000, "approval": "never"}
    refused = root.post(change, review)
    assert "needs key_arguments" in refused.content.decode()
    response = root.post(change, {**review, "key_arguments": '["order_id"]'})
    assert response.status_code == 302
    assert "shop__lookup" in catalogue.tool_names(demo.tenant)
    assert RemoteEvent.objects.get(kind="tool_enabled").actor == "user:root"
    for name in ("remoteserver", "remotetool", "remoteevent"):
        assert root.get(reverse(f"admin:remote_{name}_changelist")).status_code == 200


def test_a_superuser_registers_an_http_tool(demo: Any, root: Client) -> None:
    add = reverse("admin:remote_remoteserver_add")
    response = root.post(add, {"tenant": demo.tenant.pk, "name": "ledger", "kind": "http"})
    assert response.status_code == 302
    server = RemoteServer.objects.get()
    tool = {
        "server": server.pk,
        "name": "pay",
        "input_schema": json.dumps(SCHEMA),
        "url": "http://127.0.0.1:9/pay",
    }
    response = root.post(reverse("admin:remote_remotetool_add"), tool)
    assert response.status_code == 302
    assert RemoteTool.objects.get().name == "ledger__pay"


def test_staff_see_only_their_tenants_servers(demo: Any) -> None:
    other = Tenant.objects.create(slug="globex", name="Globex")
    RemoteServer.objects.create(tenant=other, name="theirs", kind="http")
    mine = RemoteServer.objects.create(tenant=demo.tenant, name="mine", kind="http")
    staff = UserFactory.create(username="staffer", is_staff=True)
    staff.user_permissions.add(*_view_permissions())
    demo.tenant.members.add(staff)
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("admin:remote_remoteserver_changelist")).content.decode()
    assert "mine" in page and "theirs" not in page
    assert client.get(reverse("admin:remote_remoteserver_add")).status_code == 403
    assert mine.pk


def _view_permissions() -> list[Any]:
    from django.contrib.auth.models import Permission

    return list(
        Permission.objects.filter(content_type__app_label="remote", codename__startswith="view")
    )
