"""A remote tool's reply is read as exact JSON, as the API reads request bodies: a member name
given twice (which value did the tool mean?) or a number JSON cannot carry exactly is no usable
answer, never a guess. The tool answered, so it ran: a side effect's outcome is unknown (its key
held, never run again), a read is retried. An MCP result is held to the same rule as the SDK
read it (which keeps no trace of a member name given twice). Real servers on 127.0.0.1."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from tests.remote.conftest import ScriptedHttp, ScriptedMcp, forward, send
from tests.remote.test_remote_tools import enable, mcp_tool, register_http, register_mcp, run
from toolcalls.models import IdempotencyRecord
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (b'{"status": "paid", "status": "refused"}', "status: given twice"),
        (b'{"amount_cents": 9007199254740993}', "amount_cents: 9007199254740993 is beyond"),
        (b"[" * 5000 + b"]" * 5000, "the reply is not JSON"),
    ],
)
def test_a_reply_no_reader_takes_exactly_is_a_bad_reply(
    demo: Any, scripted_http: ScriptedHttp, reply: bytes, said: str
) -> None:
    scripted_http.reply = lambda handler, _body: send(handler, 200, reply)
    enable(register_http(demo, scripted_http), "pay")
    operation = run(demo, "ledger__pay", {"order_id": "ORD-1"})
    failed = operation.calls.get()
    assert failed.state == CallState.FAILED
    retried = [event.details for event in failed.events.filter(to_state="PROPOSED")]
    assert retried and all(said in detail["detail"] for detail in retried[1:]), retried


#: An MCP result JSON cannot carry exactly, and what the call's audit says of it.
Inexact = tuple[dict[str, Any], str]


@pytest.fixture(
    params=[
        pytest.param(
            (
                {"cents": 500, "ledger_ref": 2**64 + 12345},
                "ledger_ref: 18446744073709563961 is beyond ±9007199254740991",
            ),
            id="integer",
        ),
        pytest.param(({"rate": 1e20}, "rate: 1e+20 is beyond ±9007199254740991"), id="float"),
    ]
)
def inexact(request: pytest.FixtureRequest) -> Inexact:
    return request.param


def _mcp_tool(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp, result: Any, risk: str
) -> None:
    """``shop__pay``, answering ``result``, its session forwarded through ``scripted_http``."""
    scripted_mcp.script([mcp_tool("pay")], {"pay": {"structured": result}})
    scripted_http.reply = partial(forward, scripted_mcp.url)
    enable(register_mcp(demo.tenant, f"{scripted_http.url}/mcp"), "pay", risk=risk)


def test_an_mcp_side_effect_answering_inexact_json_is_an_unknown_outcome_never_run_again(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp, inexact: Inexact
) -> None:
    result, said = inexact
    _mcp_tool(demo, scripted_mcp, scripted_http, result, "irreversible")
    first = run(demo, "shop__pay", {"order_id": "ORD-1"})
    first.refresh_from_db()
    lost = first.calls.get()
    assert (lost.state, lost.attempt) == (CallState.UNKNOWN_OUTCOME, 1)
    assert first.state == OperationState.ESCALATED
    assert f"RemoteBadReply: the reply cannot be read exactly: {said}" in first.terminal_reason
    held = IdempotencyRecord.objects.get(key=lost.idempotency_key)
    assert held.state == IdempotencyRecord.State.IN_FLIGHT
    again = run(demo, "shop__pay", {"order_id": "ORD-1"}).calls.get()
    assert (again.state, again.error_code) == (CallState.REJECTED, "IDEMPOTENCY_KEY_IN_FLIGHT")
    calls = [body for _m, _p, _h, body in scripted_http.requests if b'"tools/call"' in body]
    assert len(calls) == 1


def test_an_mcp_read_answering_inexact_json_is_a_bad_reply(
    demo: Any, scripted_mcp: ScriptedMcp, scripted_http: ScriptedHttp, inexact: Inexact
) -> None:
    result, said = inexact
    _mcp_tool(demo, scripted_mcp, scripted_http, result, "read")
    failed = run(demo, "shop__pay", {"order_id": "ORD-1"}).calls.get()
    assert (failed.state, failed.error_code, failed.attempt) == (CallState.FAILED, "TOOL_FAILED", 3)
    retried = [event.details for event in failed.events.filter(to_state="PROPOSED")]
    assert retried and all(said in detail["detail"] for detail in retried[1:]), retried
