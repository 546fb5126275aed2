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
    assert (tool["name"], tool["enabled"], tool["problem"]) == ("shop__lookup", False, None)
    assert (tool["pinned_sha256"], tool["url"], tool["reconcile_url"]) == (None, None, None)
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
    assert tools["shop__lookup"]["problem"] is None
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
    # Registered again: a change (or none), not a creation.
    moved = post(client, "/remote-servers/ledger/tools", {**tool, "url": "http://127.0.0.1:9/p2"})
    assert (moved.status_code, moved.json()["url"]) == (200, "http://127.0.0.1:9/p2")
    assert post(client, "/remote-servers/ledger/tools", tool).status_code == 200
    review = {"risk": "write", "timeout_ms": 2000, "approval": "always"}
    refused = error_of(
        post(client, "/remote-servers/ledger/tools/pay/enable", review), 400, "invalid_review"
    )
    assert "key_arguments" in refused["message"]
    bad = {**tool, "input_schema": {"type": "object", "properties": {"a": {"type": 7}}}}
    error_of(post(client, "/remote-servers/ledger/tools", bad), 400, "invalid_tool")


def _blank_values(value: Any, at: str = "") -> list[str]:
    """Where ``value`` (a response body) holds ``""``, as JSON pointers."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _blank_values(item, f"{at}/{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _blank_values(item, f"{at}/{i}")]
    return [at] if value == "" else []


def test_what_a_server_or_tool_does_not_have_reads_null(demo: Any) -> None:
    """An HTTP server has no URL; its tool, registered without description or reconcile URL,
    has no problem, no pinned revision until enabled and no approval condition: each is
    ``null``, never ``""``."""
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "ledger", "kind": "http", "signing_secret": "s"}
    server = post(client, "/remote-servers", body).json()
    assert server["url"] is None and _blank_values(server) == []
    tool = {"name": "pay", "input_schema": SCHEMA, "url": "http://127.0.0.1:9/pay"}
    created = post(client, "/remote-servers/ledger/tools", tool).json()
    absent = ("description", "problem", "pinned_sha256", "approval_condition", "reconcile_url")
    assert {name: created[name] for name in absent} == dict.fromkeys(absent)
    assert _blank_values(created) == []
    review = {"risk": "read", "timeout_ms": 2000, "approval": "never"}
    enabled = post(client, "/remote-servers/ledger/tools/pay/enable", review).json()
    assert enabled["pinned_sha256"] == enabled["served_sha256"]
    assert (enabled["problem"], enabled["approval_condition"]) == (None, None)
    listed = get(client, "/remote-servers").json()
    assert listed == [get(client, "/remote-servers/ledger").json()]
    assert _blank_values(listed) == []


@pytest.mark.parametrize("none", ["left out", None, ""])
def test_optional_text_left_out_null_or_blank_means_none_given(demo: Any, none: Any) -> None:
    """What a response shows as ``null`` can be sent back: a server's url and signing secret,
    a tool's description and reconcile URL, a review's approval condition take ``null`` and
    ``""`` as leaving them out. Blank text other than ``""`` is still refused."""
    client, _ = keyed_client(demo.tenant, MANAGE)

    def given(body: dict[str, Any], *names: str) -> dict[str, Any]:
        return body if none == "left out" else {**body, **dict.fromkeys(names, none)}

    server = given({"name": "ledger", "kind": "http"}, "url", "signing_secret")
    refused = error_of(post(client, "/remote-servers", server), 400, "invalid_server")
    assert "signing_secret" in refused["message"]
    created = post(client, "/remote-servers", {**server, "signing_secret": "s"})
    assert created.status_code == 201, created.content
    assert created.json()["url"] is None
    tool = {"name": "pay", "input_schema": SCHEMA, "url": "http://127.0.0.1:9/pay"}
    registered = post(
        client, "/remote-servers/ledger/tools", given(tool, "description", "reconcile_url")
    )
    assert registered.status_code == 201, registered.content
    assert (registered.json()["description"], registered.json()["reconcile_url"]) == (None, None)
    review = given({"risk": "read", "timeout_ms": 2000, "approval": "never"}, "approval_condition")
    enabled = post(client, "/remote-servers/ledger/tools/pay/enable", review)
    assert enabled.status_code == 200, enabled.content
    assert enabled.json()["approval_condition"] is None
    assert "ledger__pay" in catalogue.tool_names(demo.tenant)
    blank = {**review, "approval_condition": " \u200b "}
    error = error_of(
        post(client, "/remote-servers/ledger/tools/pay/enable", blank), 400, "invalid_request"
    )
    assert set(fields_of(error)) == {"approval_condition"}


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


def test_a_remote_tool_shows_the_timeout_its_review_gave(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    """The engine's timer runs past it (the exchange ends itself first and says whether the
    call went out), but the tool's timeout is the one the administrator gave."""
    scripted_mcp.script([{"name": "lookup", "description": "Find", "inputSchema": SCHEMA}])
    client, _ = keyed_client(demo.tenant, MANAGE, "operations:read")
    assert post(client, "/remote-servers", {"name": "shop", "kind": "mcp", "url": scripted_mcp.url})
    review = {"risk": "read", "timeout_ms": 2000, "approval": "never"}
    assert post(client, "/remote-servers/shop/tools/lookup/enable", review).status_code == 200
    assert get(client, "/tools/shop__lookup").json()["timeout_ms"] == 2000
