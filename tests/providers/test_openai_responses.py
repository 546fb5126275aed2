"""OpenAI Responses adapter: fixture conformance, request building, result shaping, pairing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from providers.base import Outcome, ToolDeclaration, ToolResultMessage, WireReply
from providers.openai_responses import OpenAIResponsesAdapter
from providers.openai_responses.rules import request_error
from tests.conftest import FIXTURES
from tests.providers.conformance import check, load_cases, read_case
from tests.replies import call, response

ADAPTER = OpenAIResponsesAdapter()
CASES = load_cases(FIXTURES, "openai_responses")


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fixture_case(path: Path) -> None:
    case = read_case(path)
    reply = WireReply.from_case(case)
    check(ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply), case["expect"])


@pytest.mark.parametrize(
    ("raw", "arguments", "error"),
    [
        ('{"order_id":"ORD-1"}', {"order_id": "ORD-1"}, False),
        ("", {}, False),
        ("   ", {}, False),
        ('"{\\"order_id\\":\\"ORD-1\\"}"', None, True),  # a JSON string holding JSON
        ("[1, 2]", None, True),
        ('{"a":1}{"b":2}', None, True),  # two documents back to back
        ("{'a': 1}", None, True),
        ('{"amount_cents":"5999"}', {"amount_cents": "5999"}, False),  # no coercion
    ],
)
def test_arguments_are_parsed_strictly(raw: str, arguments: object, error: bool) -> None:
    parsed = ADAPTER.parse_reply(WireReply.from_case(response(call("call_1", "get_order", raw))))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments == arguments
    assert parsed.calls[0].arguments_error is error


def test_cut_off_arguments_truncate_even_when_completed() -> None:
    reply = response(call("call_1", "get_order", '{"order_id":"ORD-'))
    parsed = ADAPTER.parse_reply(WireReply.from_case(reply))
    assert parsed.outcome is Outcome.TRUNCATED
    assert parsed.calls == ()


def test_completed_with_empty_output_is_malformed_not_final() -> None:
    parsed = ADAPTER.parse_reply(WireReply.from_case(response()))
    assert parsed.outcome is Outcome.MALFORMED


def test_insufficient_quota_is_not_retryable() -> None:
    reply = WireReply(
        kind="http_error",
        http_status=429,
        headers={"retry-after": "20"},
        body={
            "error": {
                "message": "no credit",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    )
    parsed = ADAPTER.parse_reply(reply)
    assert parsed.outcome is Outcome.API_FAILURE
    assert parsed.retryable is False
    assert parsed.retry_after_s is None


def test_request_offers_tools_and_replays_conversation() -> None:
    tool = ToolDeclaration(name="get_order", description="d", parameters={"type": "object"})
    conversation = ADAPTER.start_conversation(user_input="hello")
    body = ADAPTER.build_request(model="m", conversation=conversation, tools=[tool])
    assert body["model"] == "m"
    assert body["input"] == [{"type": "message", "role": "user", "content": "hello"}]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_order",
            "description": "d",
            "parameters": {"type": "object"},
            "strict": False,
        }
    ]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]


def test_results_follow_the_replayed_items_with_matching_call_ids() -> None:
    case = read_case(FIXTURES / "providers" / "openai_responses" / "three_calls_one_turn.json")
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    conversation = ADAPTER.append_reply(
        conversation=[{"role": "user", "content": "x"}], reply=parsed
    )
    # Reasoning item and all three function_call items come back verbatim and in order.
    assert conversation[1:] == case["body"]["output"]
    results = [
        ToolResultMessage(
            call_id=c.call_id,
            name=c.name,
            model_result={"status": "ok", "data": {"n": i}},
            is_error=False,
        )
        for i, c in enumerate(reversed(parsed.calls))
    ]
    conversation = ADAPTER.append_results(conversation=conversation, results=results)
    outputs = [item for item in conversation if item.get("type") == "function_call_output"]
    proposed = [call["call_id"] for call in case["expect"]["calls"]]
    assert {o["call_id"]: json.loads(o["output"]) for o in outputs} == {
        call_id: {"status": "ok", "data": {"n": n}} for n, call_id in enumerate(reversed(proposed))
    }
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert request_error(request=request, previous=parsed) is None


def _pairing_message(outputs: list[str], extra_calls: tuple[str, ...] = ()) -> str | None:
    reply = response(call("call_a", "get_order", "{}"), call("call_b", "get_order", "{}"))
    parsed = ADAPTER.parse_reply(WireReply.from_case(reply))
    items = [*reply["body"]["output"]]
    items += [
        {"type": "function_call", "call_id": c, "name": "x", "arguments": "{}"} for c in extra_calls
    ]
    items += [{"type": "function_call_output", "call_id": c, "output": "{}"} for c in outputs]
    problem = request_error(request={"input": items}, previous=parsed)
    if problem is None:
        return None
    assert problem.http_status == 400
    assert problem.body["error"]["type"] == "invalid_request_error"
    return problem.body["error"]["message"]


def test_request_errors_use_the_providers_400_texts() -> None:
    assert _pairing_message(["call_a", "call_b"]) is None
    assert _pairing_message(["call_a"]) == "No tool output found for function call call_b."
    assert _pairing_message(["call_a", "call_b", "call_z"]) == (
        "No tool call found for function call output with call_id call_z."
    )
    assert _pairing_message(["call_a", "call_b", "call_b"]) == (
        "Duplicate function_call_output for call_id call_b."
    )


def _stream_case() -> dict:
    return read_case(
        FIXTURES / "providers" / "openai_responses" / "stream_reasoning_then_cancellation.json"
    )


def test_stream_reports_progress_and_hands_calls_over_only_at_completion() -> None:
    case = _stream_case()
    assembler = ADAPTER.stream_assembler(max_argument_bytes=1024)
    notes = [assembler.feed(event) for event in case["events"][:-1]]
    assert [n for n in notes if n] == [case["expect"]["calls"][0]["name"]]
    cut = assembler.finish()
    assert (cut.outcome, cut.calls) == (Outcome.TRUNCATED, ())  # no terminal event yet
    assembler.feed(case["events"][-1])
    assert assembler.finish().outcome is Outcome.TOOL_PROPOSALS


def test_streamed_arguments_over_the_byte_limit_become_an_argument_error() -> None:
    reply = WireReply.from_case(_stream_case())
    parsed = ADAPTER.parse_reply(reply, max_argument_bytes=20)
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments is None and parsed.calls[0].arguments_error


def test_interleaved_argument_deltas_are_kept_apart() -> None:
    def event(kind: str, **data: object) -> dict:
        return {"event": kind, "data": {"type": kind, **data}}

    events = [
        event("response.created", response={"id": "resp_x", "status": "in_progress", "output": []}),
        event(
            "response.output_item.added",
            output_index=0,
            item={
                "id": "fc_a",
                "type": "function_call",
                "call_id": "call_a",
                "name": "get_order",
                "arguments": "",
            },
        ),
        event(
            "response.output_item.added",
            output_index=1,
            item={
                "id": "fc_b",
                "type": "function_call",
                "call_id": "call_b",
                "name": "get_order",
                "arguments": "",
            },
        ),
        event(
            "response.function_call_arguments.delta",
            item_id="fc_a",
            output_index=0,
            delta='{"order_id":',
        ),
        event(
            "response.function_call_arguments.delta",
            item_id="fc_b",
            output_index=1,
            delta='{"order_id":"ORD-2"}',
        ),
        event(
            "response.function_call_arguments.delta",
            item_id="fc_a",
            output_index=0,
            delta='"ORD-1"}',
        ),
        event(
            "response.output_item.done",
            output_index=0,
            item={
                "id": "fc_a",
                "type": "function_call",
                "call_id": "call_a",
                "arguments": '{"order_id":"ORD-1"}',
            },
        ),
        event(
            "response.output_item.done",
            output_index=1,
            item={
                "id": "fc_b",
                "type": "function_call",
                "call_id": "call_b",
                "arguments": '{"order_id":"ORD-2"}',
            },
        ),
        event("response.completed", response={"id": "resp_x", "status": "completed", "output": []}),
    ]
    parsed = ADAPTER.parse_reply(WireReply(kind="stream", http_status=200, events=events))
    assert [(c.call_id, c.name, c.arguments) for c in parsed.calls] == [
        ("call_a", "get_order", {"order_id": "ORD-1"}),
        ("call_b", "get_order", {"order_id": "ORD-2"}),
    ]


def test_stream_error_event_is_an_api_failure() -> None:
    events = [
        {
            "event": "error",
            "data": {"type": "error", "code": "server_error", "message": "boom", "param": None},
        }
    ]
    parsed = ADAPTER.parse_reply(WireReply(kind="stream", http_status=200, events=events))
    assert (parsed.outcome, parsed.raw_reason, parsed.retryable) == (
        Outcome.API_FAILURE,
        "server_error",
        True,
    )


def test_function_call_replayed_without_its_reasoning_item_is_refused() -> None:
    case = read_case(FIXTURES / "providers" / "openai_responses" / "reasoning_then_call.json")
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    output = case["body"]["output"]
    call_id = parsed.calls[0].call_id
    answer = {"type": "function_call_output", "call_id": call_id, "output": "{}"}
    without = {"input": [output[1], answer]}
    problem = request_error(request=without, previous=parsed)
    assert problem is not None
    assert problem.body["error"]["message"] == (
        f"Item '{output[1]['id']}' of type 'function_call' was provided without its required "
        f"'reasoning' item: '{output[0]['id']}'."
    )
    assert request_error(request={"input": [*output, answer]}, previous=parsed) is None
