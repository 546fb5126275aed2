"""The remote tools API: register a server, review its tools, enable and disable them; one
tenant's servers are invisible to another; secrets are never returned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api.support import MANAGE, error_of, fields_of, get, keyed_client, other_tenant, post
from tests.remote.conftest import ScriptedMcp, free_port
from toolcalls import catalogue
from toolcalls.remote.models import RemoteEvent

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


def test_register_review_enable_and_disable_an_mcp_server(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([{"name": "lookup", "description": "Find", "inputSchema": SCHEMA}])
    client, _ = keyed_client(demo.tenant, MANAGE, name="svc")
    body = {"name": "shop", "kind": "mcp", "url": scripted_mcp.url, "headers": {"X-Key": "s3"}}
    created = post(client, "/remote-servers", body)
    assert created.status_code == 201, created.content
    server = created.json()
    assert server["header_names"] == ["X-Key"] and "s3" not in created.content.decode()
    (tool,) = server["tools"]
    assert (tool["name"], tool["enabled"], tool["problem"]) == ("shop__lookup", False, "")
    review = {"risk": "read", "timeout_ms": 2000, "approval": "never"}
    enabled = post(client, "/remote-servers/shop/tools/lookup/enable", review)
    assert enabled.status_code == 200, enabled.content
    assert enabled.json()["pinned_sha256"] == tool["served_sha256"]
    assert "shop__lookup" in catalogue.tool_names(demo.tenant)
    event = RemoteEvent.objects.get(kind="tool_enabled")
    assert event.actor == "service:svc"
    assert post(client, "/remote-servers/shop/discover").status_code == 200
    disabled = post(client, "/remote-servers/shop/tools/lookup/disable")
    assert disabled.json()["enabled"] is False
    assert "shop__lookup" not in catalogue.tool_names(demo.tenant)
    assert [s["name"] for s in get(client, "/remote-servers").json()] == ["shop"]


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_a_remote_tools_catalogue_settings_are_refused_pointing_to_its_review(
    demo: Any, scripted_mcp: ScriptedMcp, method: str
) -> None:
    scripted_mcp.script([{"name": "lookup", "description": "Find", "inputSchema": SCHEMA}])
    client, _ = keyed_client(demo.tenant, MANAGE, "operations:read")
    body = {"name": "shop", "kind": "mcp", "url": scripted_mcp.url}
    assert post(client, "/remote-servers", body).status_code == 201
    review = {"risk": "read", "timeout_ms": 2000, "approval": "never"}
    assert post(client, "/remote-servers/shop/tools/lookup/enable", review).status_code == 200
    assert get(client, "/tools/shop__lookup").json()["enabled"] is True
    settings = json.dumps({"enabled": False, "max_calls": 2})
    sent = client.generic(method, "/api/v1/tools/shop__lookup", settings, "application/json")
    message = error_of(sent, 400, "invalid_request")["message"]
    assert "remote tool" in message
    assert "/api/v1/remote-servers/shop/tools/lookup/disable" in message
    assert get(client, "/tools/shop__lookup").json()["enabled"] is True  # unchanged


@pytest.mark.parametrize("maximum", [10**30, 1e30])
def test_a_served_tool_canonical_json_cannot_hold_is_listed_with_its_problem(
    demo: Any, scripted_mcp: ScriptedMcp, maximum: float
) -> None:
    """A served schema with a number beyond ±(2**53-1) has no revision digest (registering the
    server was a 500): the tool is listed, disabled, saying why, and cannot be enabled; the
    server's other tools can."""
    wide = {"type": "object", "properties": {"n": {"type": "integer", "maximum": maximum}}}
    scripted_mcp.script(
        [{"name": "wide", "inputSchema": wide}, {"name": "lookup", "inputSchema": SCHEMA}]
    )
    client, _ = keyed_client(demo.tenant, MANAGE)
    created = post(
        client, "/remote-servers", {"name": "shop", "kind": "mcp", "url": scripted_mcp.url}
    )
    assert created.status_code == 201, created.content
    tools = {tool["name"]: tool for tool in created.json()["tools"]}
    said = (
        "the served tool cannot be pinned by its canonical JSON: input_schema/properties/n/maximum"
    )
    assert tools["shop__wide"]["problem"].startswith(said), tools
    assert tools["shop__lookup"]["problem"] == ""
    review = {"risk": "read", "timeout_ms": 2000, "approval": "never"}
    refused = post(client, "/remote-servers/shop/tools/wide/enable", review)
    assert error_of(refused, 400, "invalid_tool")["message"].startswith(said)
    assert post(client, "/remote-servers/shop/tools/lookup/enable", review).status_code == 200
    assert post(client, "/remote-servers/shop/discover").status_code == 200
    assert "shop__wide" not in catalogue.tool_names(demo.tenant)


def test_an_http_tool_is_registered_with_its_schema(demo: Any) -> None:
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "ledger", "kind": "http", "signing_secret": "s"}
    assert post(client, "/remote-servers", body).status_code == 201
    tool = {"name": "pay", "input_schema": SCHEMA, "url": "http://127.0.0.1:9/pay"}
    created = post(client, "/remote-servers/ledger/tools", tool)
    assert created.status_code == 201, created.content
    assert created.json()["name"] == "ledger__pay"
    review = {"risk": "write", "timeout_ms": 2000, "approval": "always"}
    refused = error_of(
        post(client, "/remote-servers/ledger/tools/pay/enable", review), 400, "invalid_review"
    )
    assert "key_arguments" in refused["message"]
    bad = {**tool, "input_schema": {"type": "object", "properties": {"a": {"type": 7}}}}
    error_of(post(client, "/remote-servers/ledger/tools", bad), 400, "invalid_tool")


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/tools", {"name": 5}, "name"),
        ("/tools", {"url": 9}, "url"),
        ("/tools/pay/enable", {"timeout_ms": "2000"}, "timeout_ms"),
        ("/tools/pay/enable", {"timeout_ms": 120_001}, "timeout_ms"),  # as 0 is
        ("/tools/pay/enable", {"approval_condition": 1}, "approval_condition"),
        ("/tools/pay/enable", {"key_arguments": ["order_id", 2]}, "key_arguments.1"),
        ("/tools/pay/enable", {"key_arguments": ["order_id", "order_id"]}, "key_arguments"),
        ("/tools/pay/enable", {"key_context": ["tenant_ref", "tenant_ref"]}, "key_context"),
    ],
)
def test_a_wrong_value_is_refused_naming_it_not_converted_or_repeated(
    demo: Any, path: str, body: dict[str, Any], named: str
) -> None:
    client, _ = keyed_client(demo.tenant, MANAGE)
    assert (
        post(
            client, "/remote-servers", {"name": "ledger", "kind": "http", "signing_secret": "s"}
        ).status_code
        == 201
    )
    tool = {"name": "pay", "input_schema": SCHEMA, "url": "http://127.0.0.1:9/pay"}
    assert post(client, "/remote-servers/ledger/tools", tool).status_code == 201
    review = {"risk": "write", "timeout_ms": 2000, "approval": "always"}
    full = {**(tool if path == "/tools" else review), **body}
    error = error_of(post(client, f"/remote-servers/ledger{path}", full), 400, "invalid_request")
    assert set(fields_of(error)) == {named}, error
    assert "ledger__pay" not in catalogue.tool_names(demo.tenant)


def test_refusals_are_clear_4xx(demo: Any) -> None:
    client, _ = keyed_client(demo.tenant, MANAGE)
    down = {"name": "shop", "kind": "mcp", "url": f"http://127.0.0.1:{free_port()}/mcp"}
    error_of(post(client, "/remote-servers", down), 422, "server_unreachable")
    error_of(post(client, "/remote-servers", {**down, "name": "Bad Name"}), 400, "invalid_server")
    error_of(post(client, "/remote-servers", {**down, "extra": 1}), 400, "invalid_request")
    error_of(get(client, "/remote-servers/shop"), 404, "not_found")
    reader, _ = keyed_client(demo.tenant, "operations:read", name="reader")
    error_of(get(reader, "/remote-servers"), 403, "forbidden")


def test_another_tenants_servers_are_invisible(demo: Any, scripted_mcp: ScriptedMcp) -> None:
    scripted_mcp.script([{"name": "lookup", "inputSchema": SCHEMA}])
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "shop", "kind": "mcp", "url": scripted_mcp.url}
    assert post(client, "/remote-servers", body).status_code == 201
    theirs, _ = keyed_client(other_tenant(), MANAGE, name="theirs")
    assert get(theirs, "/remote-servers").json() == []
    error_of(get(theirs, "/remote-servers/shop"), 404, "not_found")
    review = {"risk": "read", "timeout_ms": 2000, "approval": "never"}
    error_of(post(theirs, "/remote-servers/shop/tools/lookup/enable", review), 404, "not_found")
