"""A tool's schema may refer only to parts of itself: a ``$ref`` (or ``$dynamicRef``) pointing
elsewhere, or to nothing, is refused where a schema comes in (the API's HTTP tools, an MCP
server's listing, ``registry.register``) and at enable; one stored before that check makes
each call of the tool a rejected call, never a crashed turn, and nothing is retrieved."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from config.inprocess_worker import InProcessWorker
from tests.api.support import MANAGE, error_of, keyed_client, post
from tests.conftest import wait_for
from tests.engine import start
from tests.remote.conftest import ScriptedHttp, ScriptedMcp
from tests.remote.test_remote_tools import ADMIN, enable, mcp_tool, register_http, run
from tests.replies import call, final, response
from tests.toolcalls.test_registry import BASE
from toolcalls import registry, tasks
from toolcalls.remote.models import RemoteTool
from toolcalls.remote.services import RemoteError, Review, remote_tool_enable
from toolcalls.services import turns
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

REMOTE = "http://evil.example/x"
MISSING = "#/$defs/missing"
READ = {"risk": "read", "timeout_ms": 2000, "approval": "never"}


def referring(reference: str) -> dict[str, Any]:
    """An object schema whose ``order_id`` is ``reference``."""
    return {"type": "object", "properties": {"order_id": {"$ref": reference}}}


def http_server(demo: Any) -> APIClient:
    """A client of the tenant's tool managers, and their HTTP server ``ledger``."""
    client, _ = keyed_client(demo.tenant, MANAGE)
    assert (
        post(
            client, "/remote-servers", {"name": "ledger", "kind": "http", "signing_secret": "s"}
        ).status_code
        == 201
    )
    return client


def http_tool(schema: dict[str, Any], url: str = "http://127.0.0.1:9") -> dict[str, Any]:
    """The API body registering HTTP tool ``pay`` with ``schema``, served at ``url``."""
    return {"name": "pay", "input_schema": schema, "url": f"{url}/pay"}


@pytest.mark.parametrize(
    ("schema", "reference"),
    [
        (referring(REMOTE), REMOTE),
        (referring(MISSING), MISSING),
        ({"type": "object", "$ref": MISSING}, MISSING),
        ({"type": "object", "properties": {"tags": {"$dynamicRef": "#nowhere"}}}, "#nowhere"),
        (referring("orders.json#/order_id"), "orders.json#/order_id"),
    ],
)
def test_the_api_refuses_a_reference_that_does_not_resolve_within_the_schema(
    demo: Any, schema: dict[str, Any], reference: str
) -> None:
    client = http_server(demo)
    answer = post(client, "/remote-servers/ledger/tools", http_tool(schema))
    assert repr(reference) in error_of(answer, 400, "invalid_tool")["message"]
    assert not RemoteTool.objects.exists()


def test_an_mcp_tool_whose_schema_refers_elsewhere_is_kept_with_its_problem_and_not_enabled(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("lookup", referring(REMOTE))])
    client, _ = keyed_client(demo.tenant, MANAGE)
    body = {"name": "shop", "kind": "mcp", "url": scripted_mcp.url}
    created = post(client, "/remote-servers", body)
    assert created.status_code == 201, created.content
    (tool,) = created.json()["tools"]
    assert repr(REMOTE) in tool["problem"], tool
    refused = post(client, "/remote-servers/shop/tools/lookup/enable", READ)
    assert repr(REMOTE) in error_of(refused, 400, "invalid_tool")["message"]


def test_a_reference_within_the_schema_is_accepted_and_arguments_are_validated_through_it(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    """The line is where the reference resolves: the same schema referring outside itself is
    refused."""
    schema = {
        **referring("#/$defs/order_id"),
        "$defs": {"order_id": {"type": "string", "pattern": "^ORD-[0-9]+$"}},
        "required": ["order_id"],
    }
    client = http_server(demo)
    outside = {**schema, "$defs": {"order_id": {"$ref": REMOTE}}}
    tools = "/remote-servers/ledger/tools"
    error_of(post(client, tools, http_tool(outside, scripted_http.url)), 400, "invalid_tool")
    assert post(client, tools, http_tool(schema, scripted_http.url)).status_code == 201
    assert post(client, f"{tools}/pay/enable", READ).status_code == 200
    replies = [
        response(call("call_1", "ledger__pay", {"order_id": "12"})),
        response(call("call_2", "ledger__pay", {"order_id": "ORD-12"})),
        final(),
    ]
    operation = start(demo, replies, tool_names=["ledger__pay"])
    refused = operation.calls.get(provider_call_id="call_1")
    ran = operation.calls.get(provider_call_id="call_2")
    assert (refused.state, refused.error_code) == (CallState.REJECTED, "INVALID_ARGUMENTS")
    assert "order_id: '12' does not match" in (refused.model_result or {})["error"]["message"]
    assert ran.state == CallState.SUCCEEDED
    assert len(scripted_http.requests) == 1


#: Schemas whose references lead back to where they are while validating one value.
LOOPS = [
    {"type": "object", "$ref": "#"},
    {"type": "object", "allOf": [{"not": {"$ref": "#"}}]},
    {
        "type": "object",
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"order_id": {"$ref": "#/$defs/a"}},
    },
]


@pytest.mark.parametrize("schema", LOOPS)
def test_a_schema_whose_references_loop_is_refused_where_it_comes_in(
    demo: Any, schema: dict[str, Any]
) -> None:
    """Validating against it would never end (a recursion error, or worse, deep in a turn).
    References that go into the value (a tree of ``children``) are no loop."""
    client = http_server(demo)
    answer = post(client, "/remote-servers/ledger/tools", http_tool(schema))
    assert "validation never ends" in error_of(answer, 400, "invalid_tool")["message"]
    with pytest.raises(ImproperlyConfigured, match="validation never ends"):
        registry.register(replace(BASE, parameters={**schema, "additionalProperties": False}))
    tree = {
        "type": "object",
        "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "properties": {"order_id": {"type": "string"}, "children": {"$ref": "#/$defs/node"}},
    }
    assert post(client, "/remote-servers/ledger/tools", http_tool(tree)).status_code == 201


def test_a_long_chain_of_references_is_checked_without_recursion(demo: Any) -> None:
    chain = {f"c{n}": {"$ref": f"#/$defs/c{n + 1}"} for n in range(3000)}
    looped = {"type": "object", "$defs": {**chain, "c3000": {"$ref": "#/$defs/c0"}}}
    client = http_server(demo)
    answer = post(client, "/remote-servers/ledger/tools", http_tool(looped))
    assert "validation never ends" in error_of(answer, 400, "invalid_tool")["message"]


@pytest.mark.parametrize("reference", [REMOTE, MISSING, "#/required"])
def test_register_refuses_a_code_tool_whose_reference_names_no_schema_within_it(
    reference: str,
) -> None:
    parameters = {**referring(reference), "additionalProperties": False, "required": ["order_id"]}
    with pytest.raises(ImproperlyConfigured, match=re.escape(repr(reference))):
        registry.register(replace(BASE, parameters=parameters))
    assert registry.get("probe") is None


def test_a_stored_schema_that_refers_outside_itself_cannot_be_enabled(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    """A row stored before references were checked is checked again when it is enabled."""
    server = register_http(demo, scripted_http)
    server.tools.update(input_schema=referring(REMOTE))
    review = Review(risk="read", timeout_ms=2000, approval="never")
    with pytest.raises(RemoteError) as refused:
        remote_tool_enable(tool_pk=server.tools.get().pk, review=review, actor=ADMIN)
    assert refused.value.code == "invalid_tool" and repr(REMOTE) in refused.value.message


@pytest.mark.parametrize("reference", ["{url}/schema.json", MISSING, "#/prefixItems/x"])
def test_a_call_meeting_a_stored_reference_that_does_not_resolve_is_rejected_and_goes_on(
    demo: Any, scripted_http: ScriptedHttp, reference: str
) -> None:
    """A schema stored before references were checked: nothing is retrieved (the first names
    the tool's own server, which would answer ``{}``), the model is not told the reference, and
    the operation completes."""
    enable(register_http(demo, scripted_http), "pay")
    reference = reference.format(url=scripted_http.url)
    RemoteTool.objects.update(input_schema=referring(reference))
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.REJECTED, "INVALID_ARGUMENTS")
    message = (refused.model_result or {})["error"]["message"]
    assert "reference that cannot be used" in message and reference not in message
    assert scripted_http.requests == []


@pytest.mark.parametrize("schema", LOOPS)
def test_a_call_meeting_a_stored_schema_whose_references_loop_is_rejected_and_goes_on(
    demo: Any, scripted_http: ScriptedHttp, schema: dict[str, Any]
) -> None:
    """Checked before validating (validation would never end), not left to the recursion
    limit, which may be reached where no exception handler can catch it."""
    enable(register_http(demo, scripted_http), "pay")
    RemoteTool.objects.update(input_schema=schema)
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.REJECTED, "INVALID_ARGUMENTS")
    assert "reference that cannot be used" in (refused.model_result or {})["error"]["message"]
    assert scripted_http.requests == []


def test_a_failed_task_is_logged_with_its_exception(
    inprocess_worker: InProcessWorker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A task that raises (as a turn whose record crashed did) is logged with its exception."""

    def fail(*, operation_pk: int) -> None:
        raise RuntimeError(f"turn of {operation_pk} cannot be recorded")

    monkeypatch.setattr(turns, "turn_run", fail)
    inprocess_worker.submit(tasks.run_turn, (64,), {})
    wait_for(
        lambda: any("sweeps take" in r.getMessage() for r in caplog.records),
        what="the failed task's log line",
    )
    (record,) = [r for r in caplog.records if "sweeps take" in r.getMessage()]
    assert record.exc_info is not None, record
    assert "RuntimeError: turn of 64 cannot be recorded" in caplog.text
