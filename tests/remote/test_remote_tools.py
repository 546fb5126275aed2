"""Remote tools behind the gate: registration and review, the calls' outcomes (bad server input
included), pinned revisions, tenant isolation. Real servers on 127.0.0.1: the fixture MCP
server process and an HTTP tool in a thread of the test."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.test import override_settings

from tests.engine import operator, start
from tests.remote.conftest import ScriptedHttp, ScriptedMcp, free_port, send
from tests.replies import call, final, response
from toolcalls import catalogue
from toolcalls.actors import Actor
from toolcalls.models import Operation, Tenant
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool
from toolcalls.remote.services import (
    HttpToolForm,
    RemoteError,
    Review,
    ServerForm,
    remote_http_tool_register,
    remote_server_discover,
    remote_server_register,
    remote_tool_enable,
)
from toolcalls.signing import SIGNATURE_HEADER, verify_signature
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

ADMIN = Actor.system("test")
SECRET = "tool-secret"
OBJECT = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
    "required": ["order_id"],
}


def mcp_tool(name: str, schema: Any = None, **annotations: bool) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} things",
        "inputSchema": OBJECT if schema is None else schema,
        "annotations": annotations,
    }


def register_mcp(tenant: Tenant, url: str, name: str = "shop") -> RemoteServer:
    form = ServerForm(name=name, kind="mcp", url=url, headers={"X-Api-Key": "k"})
    return remote_server_register(tenant=tenant, form=form, actor=ADMIN)


def review(risk: str = "read", **overrides: Any) -> Review:
    fields: dict[str, Any] = {"risk": risk, "timeout_ms": 3000, "approval": "never"}
    if risk != "read":
        fields["key_arguments"] = ["order_id"]
    return Review(**{**fields, **overrides})


def enable(server: RemoteServer, remote_name: str, **overrides: Any) -> RemoteTool:
    tool = server.tools.get(remote_name=remote_name)
    return remote_tool_enable(tool_pk=tool.pk, review=review(**overrides), actor=ADMIN)


def run(demo: Any, name: str, arguments: dict[str, Any]) -> Operation:
    replies = [response(call("call_1", name, arguments)), final()]
    return start(demo, replies, tool_names=[name])


# --- registration and review --------------------------------------------------------------------


def test_registering_lists_the_tools_for_review_and_none_is_callable(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script(
        [
            mcp_tool("lookup", readOnlyHint=True),
            mcp_tool("pay", destructiveHint=True),
            mcp_tool("broken", {"type": "object", "properties": {"a": {"type": "nonsense"}}}),
            mcp_tool("x" * 70),
        ]
    )
    server = register_mcp(demo.tenant, scripted_mcp.url)
    tools = {tool.remote_name: tool for tool in server.tools.all()}
    assert not any(tool.enabled for tool in tools.values())
    assert (tools["lookup"].name, tools["lookup"].risk) == ("shop__lookup", "read")
    assert tools["pay"].risk == "irreversible"
    assert "not valid JSON Schema" in tools["broken"].problem
    assert "not a name a model may call" in tools["x" * 70].problem
    kinds = RemoteEvent.objects.values_list("kind", flat=True)
    assert list(kinds).count("tool_discovered") == 4
    assert "shop__lookup" not in catalogue.tool_names(demo.tenant)
    with pytest.raises(RemoteError) as refused:
        enable(server, "broken")
    assert refused.value.code == "invalid_tool"
    enable(server, "lookup")
    assert "shop__lookup" in catalogue.tool_names(demo.tenant)


def test_a_server_down_at_registration_is_a_clear_error_and_nothing_is_saved(demo: Any) -> None:
    with pytest.raises(RemoteError) as refused:
        register_mcp(demo.tenant, f"http://127.0.0.1:{free_port()}/mcp")
    assert refused.value.code == "server_unreachable"
    assert not RemoteServer.objects.exists() and not RemoteTool.objects.exists()


@override_settings(CALLGATE_REMOTE_ALLOW_PRIVATE=False)
def test_a_private_address_is_refused(demo: Any) -> None:
    with pytest.raises(RemoteError, match="not a public address"):
        register_mcp(demo.tenant, "http://127.0.0.1:9/mcp")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"risk": "write", "key_arguments": []}, "needs key_arguments"),
        ({"approval": "condition", "approval_condition": "total > 5"}, "which is no argument"),
        ({"approval": "condition", "approval_condition": "amount_cents >"}, "write the condition"),
        ({"risk": "dangerous"}, "risk must be one of"),
        ({"timeout_ms": 0}, "timeout_ms must be between"),
        ({"key_context": ["password"]}, "key_context fields"),
        ({"key_context": [["subject_ref"]]}, "key_context is a list of names, each a string"),
        ({"risk": "write", "key_arguments": ["order_id"] * 2}, "names order_id more than once"),
    ],
)
def test_a_review_is_checked(
    demo: Any, scripted_mcp: ScriptedMcp, overrides: dict[str, Any], message: str
) -> None:
    scripted_mcp.script([mcp_tool("pay")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    with pytest.raises(RemoteError, match=message) as refused:
        enable(server, "pay", **overrides)
    assert refused.value.code == "invalid_review"
    assert not server.tools.get().enabled


def test_tenants_see_and_use_only_their_own_remote_tools(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("lookup", readOnlyHint=True)])
    enable(register_mcp(demo.tenant, scripted_mcp.url), "lookup")
    other = Tenant.objects.create(slug="globex", name="Globex")
    assert "shop__lookup" not in catalogue.tool_names(other)
    operation = run(demo, "shop__lookup", {"order_id": "ORD-1001"})
    operation.tenant = other
    assert catalogue.tool_spec(operation, "shop__lookup") is None
    register_mcp(other, scripted_mcp.url)  # the same prefix in another tenant
    assert "shop__lookup" not in catalogue.tool_names(other)


# --- MCP calls ----------------------------------------------------------------------------------


def test_an_mcp_call_sends_the_key_in_meta_and_its_structured_content_is_the_result(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": "echo"}})
    enable(register_mcp(demo.tenant, scripted_mcp.url), "pay", risk="write")
    operation = run(demo, "shop__pay", {"order_id": "ORD-1001", "amount_cents": 100})
    operation.refresh_from_db()
    assert operation.state == OperationState.COMPLETED
    paid = operation.calls.get()
    data = (paid.model_result or {})["data"]
    assert data["arguments"] == {"order_id": "ORD-1001", "amount_cents": 100}
    sent = data["meta"]["callgate"]
    assert sent["idempotency_key"] == paid.idempotency_key
    assert paid.idempotency_key.startswith("shop__pay:")
    assert (sent["tenant_ref"], sent["subject_ref"]) == ("acme", "cus_1001")
    assert (sent["operation_id"], sent["call_id"]) == (operation.public_id, paid.public_id)


def test_an_mcp_error_result_is_an_error_envelope(demo: Any, scripted_mcp: ScriptedMcp) -> None:
    calls = {"lookup": {"is_error": True, "structured": {"code": "NOT_FOUND"}, "text": "gone"}}
    scripted_mcp.script([mcp_tool("lookup")], calls)
    enable(register_mcp(demo.tenant, scripted_mcp.url), "lookup")
    operation = run(demo, "shop__lookup", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert failed.state == CallState.FAILED
    assert (failed.model_result or {})["error"] == {"code": "NOT_FOUND", "message": "gone"}


def test_a_tool_changed_on_its_server_does_not_run_and_awaits_review(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("lookup")])
    server = register_mcp(demo.tenant, scripted_mcp.url)
    enable(server, "lookup")
    scripted_mcp.script([mcp_tool("lookup", {**OBJECT, "required": ["amount_cents"]})])
    operation = run(demo, "shop__lookup", {"order_id": "ORD-1"})
    changed = operation.calls.get()
    assert (changed.state, changed.error_code) == (CallState.FAILED, "TOOL_CHANGED")
    tool = server.tools.get()
    assert not tool.enabled and tool.changed
    assert RemoteEvent.objects.filter(kind="tool_changed", tool=tool).exists()
    assert "shop__lookup" not in catalogue.tool_names(demo.tenant)


def _parked_then_changed(demo: Any, scripted_mcp: ScriptedMcp) -> tuple[Operation, RemoteServer]:
    """A payment parked for approval, then served in a new revision."""
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": {"paid": True}}})
    server = register_mcp(demo.tenant, scripted_mcp.url)
    enable(server, "pay", risk="irreversible", approval="always")
    operation = run(demo, "shop__pay", {"order_id": "ORD-1001", "amount_cents": 100})
    assert operation.state == OperationState.WAITING_APPROVAL
    scripted_mcp.script([mcp_tool("pay", {**OBJECT, "required": ["order_id", "amount_cents"]})])
    return operation, server


def test_a_schema_changed_while_a_call_is_parked_refuses_its_approval(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    from approvals.services import ApprovalError, approval_decide

    operation, server = _parked_then_changed(demo, scripted_mcp)
    approval = operation.approvals.get()
    with pytest.raises(ApprovalError) as refused:
        approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, reason="")
    assert refused.value.code == "precondition_failed"
    assert "changed on its server and awaits review" in refused.value.message
    approval.refresh_from_db()
    assert approval.state == "PENDING"
    assert operation.calls.get().state == CallState.WAITING_APPROVAL
    assert not server.tools.get().enabled  # the new revision is recorded, awaiting review


def test_a_schema_changed_after_the_decision_makes_the_approval_stale(
    demo: Any, scripted_mcp: ScriptedMcp, monkeypatch: pytest.MonkeyPatch
) -> None:
    from approvals import services as approvals_services

    operation, server = _parked_then_changed(demo, scripted_mcp)
    # The change lands after the decision's own check: the resume finds it.
    monkeypatch.setattr(approvals_services, "precondition_failure", lambda **kwargs: None)
    approval = operation.approvals.get()
    approvals_services.approval_decide(
        approval_pk=approval.pk, actor=operator(), approve=True, reason=""
    )
    stale = operation.calls.get()
    assert (stale.state, stale.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    assert stale.attempt == 0
    assert not server.tools.get().enabled
    assert remote_server_discover(server_pk=server.pk, actor=ADMIN)[0].changed


def test_a_slow_mcp_server_times_out_within_the_tools_budget(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"sleep_s": 5}})
    enable(register_mcp(demo.tenant, scripted_mcp.url), "pay", risk="write", timeout_ms=500)
    began = time.monotonic()
    operation = run(demo, "shop__pay", {"order_id": "ORD-1"})
    assert time.monotonic() - began < 4
    operation.refresh_from_db()
    lost = operation.calls.get()
    assert lost.state == CallState.UNKNOWN_OUTCOME and lost.attempt == 1
    assert operation.state == OperationState.ESCALATED


# --- HTTP calls ---------------------------------------------------------------------------------


def register_http(demo: Any, tool: ScriptedHttp, *, reconcile: bool = False) -> RemoteServer:
    form = ServerForm(name="ledger", kind="http", signing_secret=SECRET)
    server = remote_server_register(tenant=demo.tenant, form=form, actor=ADMIN)
    http = HttpToolForm(
        name="pay",
        description="Pay",
        input_schema=OBJECT,
        url=f"{tool.url}/pay",
        reconcile_url=f"{tool.url}/reconcile" if reconcile else "",
    )
    remote_http_tool_register(server_pk=server.pk, form=http, actor=ADMIN)
    return server


def answer(status: int, body: bytes) -> Any:
    def reply(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        send(handler, status, body)

    return reply


def test_an_http_call_is_signed_and_its_json_is_the_result(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = answer(200, b'{"paid": true}')
    enable(register_http(demo, scripted_http), "pay", risk="write")
    operation = run(demo, "shop__pay".replace("shop", "ledger"), {"order_id": "ORD-1"})
    paid = operation.calls.get()
    assert (paid.state, (paid.model_result or {})["data"]) == (CallState.SUCCEEDED, {"paid": True})
    ((method, path, headers, body),) = scripted_http.requests
    assert (method, path, headers["Idempotency-Key"]) == ("POST", "/pay", paid.idempotency_key)
    assert verify_signature(secret=SECRET, header=headers[SIGNATURE_HEADER], body=body)
    sent = json.loads(body)
    assert sent == {
        "tool": "pay",
        "arguments": {"order_id": "ORD-1"},
        "call_id": paid.public_id,
        "operation_id": operation.public_id,
        "tenant_ref": "acme",
        "subject_ref": "cus_1001",
    }


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (422, b'{"error": {"code": "ORDER_CLOSED", "message": "closed"}}', "ORDER_CLOSED"),
        (404, b"not found", "HTTP_404"),
    ],
)
def test_a_4xx_is_a_tool_error_before_any_effect(
    demo: Any, scripted_http: ScriptedHttp, status: int, body: bytes, code: str
) -> None:
    scripted_http.reply = answer(status, body)
    enable(register_http(demo, scripted_http), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    refused = operation.calls.get()
    assert (refused.state, refused.error_code) == (CallState.FAILED, code)
    assert len(scripted_http.requests) == 1


@pytest.mark.parametrize(
    ("status", "body"),
    [(200, b"<html>not json</html>"), (200, b"[1, 2]"), (200, b'{"a": "' + b"x" * 2048 + b'"}')],
)
@override_settings(CALLGATE_REMOTE_MAX_REPLY_BYTES=1024)
def test_a_bad_reply_from_a_read_tool_is_retried_then_fails_audited(
    demo: Any, scripted_http: ScriptedHttp, status: int, body: bytes
) -> None:
    scripted_http.reply = answer(status, body)
    enable(register_http(demo, scripted_http), "pay")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert (failed.state, failed.error_code) == (CallState.FAILED, "TOOL_FAILED")
    assert len(scripted_http.requests) == failed.attempt == 3
    details = [event.details for event in failed.events.filter(to_state="PROPOSED")]
    assert all("RemoteBadReply" in detail["detail"] for detail in details[1:])


def test_a_lost_answer_of_a_write_is_never_sent_again_and_escalates(
    demo: Any, scripted_http: ScriptedHttp
) -> None:
    scripted_http.reply = answer(503, b"{}")
    enable(register_http(demo, scripted_http), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    operation.refresh_from_db()
    lost = operation.calls.get()
    assert lost.state == CallState.UNKNOWN_OUTCOME
    assert operation.state == OperationState.ESCALATED
    assert len(scripted_http.requests) == 1


@pytest.mark.parametrize(("applied", "state"), [(True, "SUCCEEDED"), (None, "UNKNOWN_OUTCOME")])
def test_a_lost_answer_is_reconciled_with_the_key(
    demo: Any, scripted_http: ScriptedHttp, applied: bool | None, state: str
) -> None:
    def reply(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if handler.command == "POST":
            send(handler, 502, b"{}")
        else:
            send(handler, 200, json.dumps({"applied": applied, "result": {"paid": 1}}).encode())

    scripted_http.reply = reply
    enable(register_http(demo, scripted_http, reconcile=True), "pay", risk="irreversible")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    reconciled = operation.calls.get()
    assert reconciled.state == state
    method, path, headers, _ = scripted_http.requests[1]
    assert method == "GET" and path.startswith("/reconcile?idempotency_key=")
    assert headers["Idempotency-Key"] == reconciled.idempotency_key
    assert [request[0] for request in scripted_http.requests].count("POST") == 1


def test_a_tool_disabled_while_a_call_is_parked_makes_the_approval_stale(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    from approvals.services import approval_decide
    from toolcalls.remote.services import remote_tool_disable

    scripted_mcp.script([mcp_tool("pay")])
    tool = enable(register_mcp(demo.tenant, scripted_mcp.url), "pay", approval="always")
    operation = run(demo, "shop__pay", {"order_id": "ORD-1001"})
    remote_tool_disable(tool_pk=tool.pk, actor=ADMIN)
    approval = operation.approvals.get()
    approval_decide(approval_pk=approval.pk, actor=operator(), approve=True, reason="")
    stale = operation.calls.get()
    assert (stale.state, stale.error_code) == (CallState.REJECTED, "APPROVAL_STALE")
    assert RemoteEvent.objects.filter(kind="tool_disabled", tool=tool).exists()


def test_mcp_server_add_registers_the_server_and_lists_its_tools(
    demo: Any, scripted_mcp: ScriptedMcp
) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    broken = {"type": "object", "properties": {"a": {"type": 7}}}
    scripted_mcp.script([mcp_tool("lookup"), mcp_tool("broken", broken)])
    out = StringIO()
    call_command(
        "mcp_server_add", "--tenant", "acme", "--name", "shop", "--url", scripted_mcp.url,
        "--header", "X-Api-Key: secret", stdout=out,
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("registered acme/shop")
    assert "  shop__lookup: awaits review" in lines
    assert any(
        line.startswith("  shop__broken: cannot be enabled: the input schema is not")
        for line in lines
    )
    assert RemoteServer.objects.get().headers == {"X-Api-Key": "secret"}
    with pytest.raises(CommandError, match="already has a server shop"):
        call_command(
            "mcp_server_add", "--tenant", "acme", "--name", "shop", "--url", scripted_mcp.url
        )
    with pytest.raises(CommandError, match="cannot be used"):
        call_command(
            "mcp_server_add", "--tenant", "acme", "--name", "down",
            "--url", f"http://127.0.0.1:{free_port()}/mcp",
        )  # fmt: skip
