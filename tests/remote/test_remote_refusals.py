"""A remote server's, HTTP tool's or review's refusal names the field it is about in
``details.fields``, as every refusal of an input does (docs/api.md), keeping its own code."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.support import MANAGE, error_of, fields_of, keyed_client, post

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}, "amount": {}}}
MCP = {"name": "shop", "kind": "mcp", "url": "http://127.0.0.1:9/mcp"}
HTTP = {"name": "ledger", "kind": "http", "signing_secret": "s"}
TOOL = {"name": "pay", "input_schema": SCHEMA, "url": "http://127.0.0.1:9/pay"}


@pytest.fixture
def client(demo: Any) -> Any:
    return keyed_client(demo.tenant, MANAGE)[0]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**HTTP, "url": "http://127.0.0.1:9/"}, "url"),
        ({**HTTP, "command": ["tools"]}, "command"),
        ({"name": "ledger", "kind": "http"}, "signing_secret"),
        ({"name": "shop", "kind": "mcp"}, "url"),
        ({**MCP, "command": ["tools"]}, "command"),
        ({**MCP, "signing_secret": "s"}, "signing_secret"),
        ({**MCP, "url": "http://user:secret@127.0.0.1:9/mcp"}, "url"),
        ({**MCP, "headers": {"X-Key": "k", "Host": "elsewhere"}}, "headers.Host"),
        ({**MCP, "headers": {"X Key": "k"}}, "headers.X Key"),
    ],
)
def test_a_server_refused_names_its_field(client: Any, body: dict[str, Any], field: str) -> None:
    error = error_of(post(client, "/remote-servers", body), 400, "invalid_server")
    assert fields_of(error) == {field: [error["message"]]}


def test_an_http_servers_url_says_to_leave_it_out(client: Any) -> None:
    body = {**HTTP, "url": "http://127.0.0.1:9/"}
    error = error_of(post(client, "/remote-servers", body), 400, "invalid_server")
    assert error["message"] == "HTTP tools name their own URLs; an HTTP server takes no url"


def test_a_server_name_taken_names_name(client: Any) -> None:
    assert post(client, "/remote-servers", HTTP).status_code == 201
    error = error_of(post(client, "/remote-servers", HTTP), 409, "server_exists")
    assert fields_of(error) == {"name": ["acme already has a server ledger"]}


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ({**TOOL, "name": "pay now"}, "name"),
        ({**TOOL, "input_schema": {"type": "object", "properties": {"a": {"type": 7}}}},
         "input_schema"),
        ({**TOOL, "input_schema": {"type": "string"}}, "input_schema"),
        ({**TOOL, "url": "http://user:secret@127.0.0.1:9/pay"}, "url"),
        ({**TOOL, "reconcile_url": "http://user:secret@127.0.0.1:9/r"}, "reconcile_url"),
    ],
)  # fmt: skip
def test_an_http_tool_refused_names_its_field(
    client: Any, tool: dict[str, Any], field: str
) -> None:
    assert post(client, "/remote-servers", HTTP).status_code == 201
    error = error_of(post(client, "/remote-servers/ledger/tools", tool), 400, "invalid_tool")
    assert fields_of(error) == {field: [error["message"]]}


@pytest.mark.parametrize(
    ("review", "field"),
    [
        ({"risk": "write", "approval": "always"}, "key_arguments"),
        ({"risk": "write", "approval": "always", "key_arguments": ["nope"]}, "key_arguments"),
        ({"approval": "condition", "approval_condition": "order_id >"}, "approval_condition"),
        ({"approval": "condition", "approval_condition": "order_id > 5"}, "approval_condition"),
        ({"approval": "never", "approval_condition": "amount > 5"}, "approval_condition"),
    ],
)
def test_a_review_refused_names_its_field(client: Any, review: dict[str, Any], field: str) -> None:
    assert post(client, "/remote-servers", HTTP).status_code == 201
    assert post(client, "/remote-servers/ledger/tools", TOOL).status_code == 201
    body = {"risk": "read", "timeout_ms": 2000, "approval": "never", **review}
    answer = post(client, "/remote-servers/ledger/tools/pay/enable", body)
    error = error_of(answer, 400, "invalid_review")
    assert fields_of(error) == {field: [error["message"]]}
