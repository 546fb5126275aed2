"""The admin's remote tool pages: register a server, review and enable a tool, register an
HTTP tool; staff see only their tenants' servers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
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
    response = root.post(
        add, {"tenant": demo.tenant.pk, "name": "ledger", "kind": "http", "signing_secret": "s"}
    )
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


#: IDs no row has: not a number, a NUL (``%00`` in a path), beyond bigint.
MALFORMED_IDS = ["abc", "\x00", "99999999999999999999"]
#: Stands for the pk of a row of a tenant the staff member is not a member of.
OTHER_TENANT = "other tenant"


def _tool_change(client: Client, pk: str) -> Any:
    return client.get(reverse("admin:remote_remotetool_change", args=[pk]))


def _tool_review(client: Client, pk: str) -> Any:
    review = {"enabled": "on", "risk": "read", "timeout_ms": "1000", "approval": "never"}
    return client.post(reverse("admin:remote_remotetool_change", args=[pk]), review)


def _tool_add(client: Client, pk: str) -> Any:
    tool = {"server": pk, "name": "pay", "input_schema": "{}", "url": "http://127.0.0.1:9/p"}
    return client.post(reverse("admin:remote_remotetool_add"), tool)


def _server_add(client: Client, pk: str) -> Any:
    server = {"tenant": pk, "name": "ledger", "kind": "http", "signing_secret": "s"}
    return client.post(reverse("admin:remote_remoteserver_add"), server)


def _discover(client: Client, pk: str) -> Any:
    action = {"action": "discover", "index": "0", "_selected_action": pk}
    return client.post(reverse("admin:remote_remoteserver_changelist"), action)


#: Each remote page taking an ID: the kind of row it names, then Django's answer to a
#: superuser naming no row and to a staff member naming another tenant's row.
ID_PAGES: dict[str, tuple[Callable[[Client, str], Any], str, str, str]] = {
    "tool change": (_tool_change, "tool", "missing", "missing"),
    "tool review": (_tool_review, "tool", "missing", "forbidden"),
    "tool add": (_tool_add, "server", "form error", "forbidden"),
    "server add": (_server_add, "tenant", "form error", "forbidden"),
    "discover": (_discover, "server", "refused", "no such action"),
}


@pytest.fixture
def theirs() -> dict[str, Any]:
    """Another tenant's tenant row, MCP server and tool."""
    tenant = Tenant.objects.create(slug="globex", name="Globex")
    server = RemoteServer.objects.create(tenant=tenant, name="theirs", kind="mcp", url="http://x")
    tool = RemoteTool.objects.create(
        tenant=tenant,
        server=server,
        remote_name="pay",
        name="theirs__pay",
        input_schema=SCHEMA,
        served_sha256="0" * 64,
    )
    return {"tenant": tenant, "server": server, "tool": tool}


@pytest.fixture
def staff(demo: Any) -> Client:
    """A member of the demo tenant with every remote view permission."""
    user = UserFactory.create(username="staffer", is_staff=True)
    user.user_permissions.add(*_view_permissions())
    demo.tenant.members.add(user)
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("bad", [*MALFORMED_IDS, OTHER_TENANT])
@pytest.mark.parametrize("page", ID_PAGES)
def test_an_id_naming_no_row_the_user_sees_is_never_a_500(
    root: Client, staff: Client, theirs: dict[str, Any], page: str, bad: str
) -> None:
    view, kind, superuser_answer, staff_answer = ID_PAGES[page]
    if bad == OTHER_TENANT:
        _assert_answer(view(staff, str(theirs[kind].pk)), staff_answer)
    else:
        _assert_answer(view(root, bad), superuser_answer)
    assert not RemoteEvent.objects.exists()  # nothing registered, discovered or reviewed
    assert RemoteTool.objects.get().enabled is False


def _assert_answer(response: Any, answer: str) -> None:
    said = [str(message) for message in get_messages(response.wsgi_request)]
    if answer == "missing":
        assert response.status_code == 302 and response["Location"] == reverse("admin:index")
        assert any("exist. Perhaps it was deleted?" in text for text in said), said
    elif answer == "forbidden":
        assert response.status_code == 403
    elif answer == "form error":
        assert response.status_code == 200 and response.context["form"].errors
    elif answer == "refused":  # back to the list, saying why, as for an empty selection
        changelist = reverse("admin:remote_remoteserver_changelist")
        assert response.status_code == 302 and response["Location"] == changelist
        assert said, "a refused action says why"
    else:  # not offered: the list, as if no action had been asked for
        assert response.status_code == 200 and not said, said


def test_staff_cannot_list_servers_tools_again(demo: Any, staff: Client) -> None:
    mine = RemoteServer.objects.create(tenant=demo.tenant, name="mine", kind="mcp", url="http://x")
    changelist = staff.get(reverse("admin:remote_remoteserver_changelist"))
    assert "discover" not in changelist.content.decode()
    assert _discover(staff, str(mine.pk)).status_code == 200
    assert not RemoteEvent.objects.exists()


def test_a_selection_of_rows_the_user_sees_still_reaches_the_action(
    root: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = Tenant.objects.create(slug="globex", name="Globex")
    server = RemoteServer.objects.create(tenant=theirs, name="theirs", kind="mcp", url="http://x")
    listed: list[int] = []
    discover = lambda **kwargs: listed.append(kwargs["server_pk"])  # noqa: E731
    monkeypatch.setattr("toolcalls.admin.remote_server_discover", discover)
    response = _discover(root, str(server.pk))
    assert response.status_code == 302
    assert listed == [server.pk]


@pytest.mark.parametrize("model", ["remoteserver", "remotetool"])
def test_servers_and_tools_offer_no_delete_that_could_never_succeed(
    root: Client, theirs: dict[str, Any], model: str
) -> None:
    """Their append-only events protect them (every server has ``server_registered``, every
    tool ``tool_discovered``): the admin offered "Delete selected …" and a delete page, and
    deleting always failed. A tool is retired by disabling it."""
    row = theirs["server" if model == "remoteserver" else "tool"]
    RemoteEvent.objects.create(
        tenant=row.tenant,
        server=theirs["server"],
        tool=theirs["tool"] if model == "remotetool" else None,
        kind="tool_discovered" if model == "remotetool" else "server_registered",
        actor="user:root",
    )
    changelist = reverse(f"admin:remote_{model}_changelist")
    page = root.get(changelist)
    assert page.status_code == 200
    assert "delete_selected" not in page.content.decode()
    action = {"action": "delete_selected", "index": "0", "_selected_action": str(row.pk)}
    response = root.post(changelist, action)
    assert response.status_code in (200, 302)  # not offered: no page asking to confirm
    assert "Are you sure" not in response.content.decode()
    assert root.get(reverse(f"admin:remote_{model}_delete", args=[row.pk])).status_code == 403
    assert type(row).objects.filter(pk=row.pk).exists()
