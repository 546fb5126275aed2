"""A registered server's address, headers and signing secret change (a token or secret rotated,
an MCP server moved) under the rules of registering it; the next request uses them, and an MCP
server is listed at its new address first, what it serves there recorded as discovery does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.support import MANAGE, error_of, fields_of, keyed_client, other_tenant
from tests.remote.conftest import ScriptedHttp, ScriptedMcp, free_port
from tests.remote.test_remote_tools import (
    ADMIN,
    answer,
    enable,
    mcp_tool,
    register_http,
    register_mcp,
    run,
)
from toolcalls.remote import services
from toolcalls.remote.models import RemoteEvent, RemoteServer
from toolcalls.remote.services import RemoteError, ServerChange, remote_server_change
from toolcalls.signing import SIGNATURE_HEADER, verify_signature
from toolcalls.states import CallState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


def _change(server: RemoteServer, **fields: Any) -> RemoteServer:
    return remote_server_change(server_pk=server.pk, change=ServerChange(**fields), actor=ADMIN)


def test_a_rotated_secret_and_headers_sign_and_go_with_the_next_call(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = answer(200, b'{"paid": true}')
    server = register_http(demo, scripted_http)
    enable(server, "pay", risk="write")
    _change(server, signing_secret="rotated-secret", headers={"Authorization": "Bearer two"})
    paid = run(demo, "ledger__pay", {"order_id": "ORD-1"}).calls.get()
    assert paid.state == CallState.SUCCEEDED
    ((_, _, headers, body),) = scripted_http.requests
    assert verify_signature(secret="rotated-secret", header=headers[SIGNATURE_HEADER], body=body)
    assert not verify_signature(secret="tool-secret", header=headers[SIGNATURE_HEADER], body=body)
    assert headers["Authorization"] == "Bearer two"
    event = RemoteEvent.objects.get(kind="server_changed")
    assert event.details == {"changed": ["headers", "signing_secret"]}  # never the values
    assert "rotated" not in json.dumps(event.details) and "two" not in json.dumps(event.details)
    assert server.tools.get().enabled  # a secret is not a revision of the tool


def test_the_same_values_change_nothing(demo: Any, scripted_http: ScriptedHttp) -> None:
    server = register_http(demo, scripted_http)
    _change(server, signing_secret="tool-secret", headers={})
    assert not RemoteEvent.objects.filter(kind="server_changed").exists()


def test_a_change_writes_only_the_fields_it_names(
    demo: Any, scripted_http: ScriptedHttp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another change made between this one's read and its lock is kept, not reverted."""
    server = register_http(demo, scripted_http)
    check = services._server_form_check

    def meanwhile(form: Any) -> None:
        check(form)
        RemoteServer.objects.filter(pk=server.pk).update(headers={"X-Token": "other"})

    monkeypatch.setattr(services, "_server_form_check", meanwhile)
    _change(server, signing_secret="rotated-secret")
    stored = RemoteServer.objects.get(pk=server.pk)
    assert (stored.signing_secret, stored.headers) == ("rotated-secret", {"X-Token": "other"})
    assert RemoteEvent.objects.get(kind="server_changed").details == {"changed": ["signing_secret"]}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"signing_secret": ""}, "signing_secret"),  # an HTTP server's requests are signed
        ({"headers": {"Host": "elsewhere"}}, "headers.Host"),
        ({"url": "https://example.com/mcp"}, "url"),  # HTTP tools name their own URLs
    ],
)
def test_a_change_breaking_a_rule_is_refused_naming_the_field_and_changes_nothing(
    demo: Any, scripted_http: ScriptedHttp, fields: dict[str, Any], where: str
) -> None:
    server = register_http(demo, scripted_http)
    with pytest.raises(RemoteError) as refused:
        _change(server, **fields)
    assert refused.value.code == "invalid_server"
    assert list(refused.value.details["fields"]) == [where]
    stored = RemoteServer.objects.get(pk=server.pk)
    assert (stored.signing_secret, stored.headers, stored.url) == ("tool-secret", {}, "")
    assert not RemoteEvent.objects.filter(kind="server_changed").exists()


def test_an_mcp_server_takes_no_secret(demo: Any, scripted_mcp: ScriptedMcp) -> None:
    scripted_mcp.script([mcp_tool("lookup")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    with pytest.raises(RemoteError) as refused:
        _change(server, signing_secret="s")
    assert list(refused.value.details["fields"]) == ["signing_secret"]


def test_a_moved_mcp_server_is_listed_there_first(demo: Any, scripted_mcp: ScriptedMcp) -> None:
    scripted_mcp.script([mcp_tool("lookup"), mcp_tool("find")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    enable(server, "lookup")
    enable(server, "find")
    nowhere = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(RemoteError) as unreachable:
        _change(server, url=nowhere)
    assert unreachable.value.code == "server_unreachable"
    assert RemoteServer.objects.get(pk=server.pk).url == scripted_mcp.url  # unchanged
    # At its new address it serves `lookup` as before and `find` changed: `find` is disabled
    # until enabled again, `lookup` goes on.
    scripted_mcp.script([mcp_tool("lookup"), mcp_tool("find", {"type": "object"})])
    moved = scripted_mcp.url.replace("127.0.0.1", "localhost")
    _change(server, url=moved, headers={"X-Api-Key": "rotated"})
    tools = {tool.remote_name: tool for tool in server.tools.all()}
    assert (tools["lookup"].enabled, tools["find"].enabled) == (True, False)
    assert RemoteServer.objects.get(pk=server.pk).url == moved
    kinds = list(RemoteEvent.objects.order_by("pk").values_list("kind", flat=True))
    assert kinds[-2:] == ["server_changed", "tool_changed"]


def _patch(client: Any, path: str, body: Any) -> Any:
    return client.generic("PATCH", f"/api/v1{path}", json.dumps(body), "application/json")


def test_the_api_rotates_a_servers_secret_and_headers(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    register_http(demo, scripted_http)
    client, _ = keyed_client(demo.tenant, MANAGE, name="ops")
    changed = _patch(client, "/remote-servers/ledger", {"headers": {"X-Token": "t2"}})
    assert changed.status_code == 200, changed.content
    assert changed.json()["header_names"] == ["X-Token"] and "t2" not in changed.content.decode()
    rotated = _patch(client, "/remote-servers/ledger", {"signing_secret": "s2"})
    assert rotated.status_code == 200 and "s2" not in rotated.content.decode()
    stored = RemoteServer.objects.get(name="ledger")
    assert (stored.headers, stored.signing_secret) == ({"X-Token": "t2"}, "s2")
    actors = RemoteEvent.objects.filter(kind="server_changed").values_list("actor", flat=True)
    assert list(actors) == ["service:ops", "service:ops"]


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"signing_secret": ""}, 400, "invalid_request", "signing_secret"),
        ({"headers": {"Host": "x"}}, 400, "invalid_server", "headers.Host"),
        ({"name": "other"}, 400, "invalid_request", "name"),  # what a server is never changes
        ({"headers": ["X-Token"]}, 400, "invalid_request", "headers"),
    ],
)
def test_the_api_refuses_a_change_naming_the_field(
    demo: Any, scripted_http: ScriptedHttp, body: Any, status: int, code: str, field: str
) -> None:
    register_http(demo, scripted_http)
    client, _ = keyed_client(demo.tenant, MANAGE)
    refused = _patch(client, "/remote-servers/ledger", body)
    assert field in fields_of(error_of(refused, status, code))
    assert RemoteServer.objects.get(name="ledger").signing_secret == "tool-secret"


def test_only_the_tenants_managers_change_its_servers(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    register_http(demo, scripted_http)
    reader, _ = keyed_client(demo.tenant, "operations:read")
    assert _patch(reader, "/remote-servers/ledger", {"signing_secret": "x"}).status_code == 403
    stranger, _ = keyed_client(other_tenant(), MANAGE)
    assert _patch(stranger, "/remote-servers/ledger", {"signing_secret": "x"}).status_code == 404
    assert RemoteServer.objects.get(name="ledger").signing_secret == "tool-secret"
