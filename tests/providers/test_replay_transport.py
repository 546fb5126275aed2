"""The replay transport serves replies in order and answers bad pairings like the provider; a
script whose reply could only fail is refused before it runs (``script_problems``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.errors import TransportError
from providers.families import ADAPTERS
from providers.openai_responses import OpenAIResponsesAdapter
from providers.replay import ReplayTransport, ScriptProblem, script_problems
from tests.conftest import FIXTURES
from tests.providers.test_parsers_are_total import PROFILE, json_values
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


def _case(kind: str, status: int, **carried: Any) -> dict[str, Any]:
    return {"kind": kind, "http_status": status, **carried}


@pytest.mark.parametrize(
    ("reply", "path", "message"),
    [
        (
            _case("response", 500, body=FIRST["body"]),
            (0, "http_status"),
            "a response reply has a 2xx status, not 500: an error status is an http_error",
        ),
        (
            _case("stream", 429, events=[]),
            (0, "http_status"),
            "a stream reply has a 2xx status, not 429: an error status is an http_error",
        ),
        (
            _case("http_error", 200, body={}),
            (0, "http_status"),
            "an http_error reply has a 4xx or 5xx status, not 200: a model's reply is a response "
            "or a stream",
        ),
        (
            _case("http_error", 302, body={}),
            (0, "http_status"),
            "an http_error reply has a 4xx or 5xx status, not 302: a model's reply is a response "
            "or a stream",
        ),
        (
            _case("response", 200, events=[]),
            (0, "events"),
            "a response reply carries a body, not events",
        ),
        (_case("stream", 200, body={}), (0, "body"), "a stream reply carries events, not a body"),
        (_case("response", 200, body=[1]), (0, "body"), "a response reply's body is a JSON object"),
        (
            _case("response", 200, body={"id": "resp_1", "output": []}),
            (0, "body"),
            f"not a reply of the openai_responses family: {ADAPTER.revision}: the response is not "
            "finished (no status)",
        ),
        (
            {
                "after_results": {
                    "ok": final(),
                    "error": _case("response", 201, body={"choices": []}),
                }
            },
            (0, "after_results", "error", "body"),
            f"not a reply of the openai_responses family: {ADAPTER.revision}: the response is not "
            "finished (no status)",
        ),
    ],
)
def test_a_reply_that_could_only_fail_is_a_problem_of_the_script(
    reply: dict[str, Any], path: tuple[Any, ...], message: str
) -> None:
    assert script_problems([reply, final()], ADAPTER) == [ScriptProblem(path, message)]


def test_every_reply_the_provider_may_send_is_a_valid_script() -> None:
    # Refusals, cut-off streams, malformed calls, failures inside a 200, any HTTP error body:
    # every case of the corpus, in its own family.
    for path in sorted((FIXTURES / "providers").rglob("*.json")):
        case = json.loads(path.read_text(encoding="utf-8"))
        reply = {k: v for k, v in case.items() if k not in ("id", "family", "description")}
        reply.pop("expect")
        assert script_problems([reply], ADAPTERS[case["family"]]) == [], path.name
    gateway = _case("http_error", 502, body="<html>Bad gateway</html>")
    assert script_problems([gateway, REPLIES[1], final()], ADAPTER) == []


def test_a_reply_of_another_family_is_not_one_of_this_familys() -> None:
    anthropic = ADAPTERS["anthropic_messages"]
    [problem] = script_problems([final()], anthropic)
    assert problem.path == (0, "body")
    assert problem.message.startswith("not a reply of the anthropic_messages family: ")


@pytest.mark.parametrize("family", sorted(ADAPTERS))
@PROFILE
@given(
    kind=st.sampled_from(["response", "stream", "http_error"]),
    status=st.integers(100, 599),
    carried=st.sampled_from(["body", "events"]),
    body=json_values,
    events=st.lists(
        st.fixed_dictionaries({"event": st.none() | st.text(max_size=30), "data": json_values}),
        max_size=6,
    ),
)
def test_any_reply_of_the_right_shape_is_checked_without_raising(
    family: str, kind: str, status: int, carried: str, body: Any, events: list[Any]
) -> None:
    reply = {"kind": kind, "http_status": status, carried: body if carried == "body" else events}
    branching = {"after_results": {"ok": reply, "error": final()}}
    problems = script_problems([reply, branching], ADAPTERS[family])
    assert all(isinstance(problem, ScriptProblem) for problem in problems)
