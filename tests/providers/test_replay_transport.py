"""The replay transport serves replies in order and answers bad pairings like the provider."""

from __future__ import annotations

import pytest

from providers.errors import TransportError
from providers.openai_responses import OpenAIResponsesAdapter
from providers.replay import ReplayTransport
from tests.replies import call, final, http_error, response

ADAPTER = OpenAIResponsesAdapter()
FIRST = response(call("call_a", "get_order", '{"order_id":"ORD-1001"}'))
REPLIES = [FIRST, http_error(503, "server_error"), final("done")]


def _request(*outputs: str) -> dict:
    items = [{"role": "user", "content": "hi"}, *FIRST["body"]["output"]]
    items += [{"type": "function_call_output", "call_id": c, "output": "{}"} for c in outputs]
    return {"input": items}


def test_serves_replies_in_order_and_checks_pairing_across_failed_replies() -> None:
    transport = ReplayTransport(adapter=ADAPTER, replies=REPLIES)
    assert transport.send(request={"input": []}, turn=0).body == FIRST["body"]
    assert transport.send(request=_request("call_a"), turn=1).http_status == 503
    # Reply 2 follows a failure: the pairing is checked against reply 0, the last real reply.
    assert transport.send(request=_request("call_a"), turn=2).body == REPLIES[2]["body"]
    missing = transport.send(request=_request(), turn=2)
    assert missing.http_status == 400
    assert missing.body["error"]["message"] == "No tool output found for function call call_a."


def test_request_past_the_last_reply_is_a_clear_failure() -> None:
    transport = ReplayTransport(adapter=ADAPTER, replies=REPLIES)
    with pytest.raises(
        TransportError, match="scenario exhausted: request #4 but the scenario has only 3 replies"
    ) as exc:
        transport.send(request=_request("call_a"), turn=3)
    assert exc.value.code == "scenario_exhausted"
    assert exc.value.retryable is False
