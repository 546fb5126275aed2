"""OpenAI Chat Completions adapter: fixture conformance, request building, result shaping,
pairing rules and stream assembly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from providers.base import Outcome, ParsedReply, ToolDeclaration, ToolResultMessage, WireReply
from providers.openai_chat import OpenAIChatAdapter
from providers.openai_chat.rules import request_error
from providers.replay import ReplayTransport
from providers.streaming import OVERFLOW_MARKER
from tests.conftest import FIXTURES
from tests.providers.conformance import check, load_cases, read_case
from tests.replies import scripted

ADAPTER = OpenAIChatAdapter()
CASES = load_cases(FIXTURES, "openai_chat")
RESPONSE_ID = "chatcmpl-Tq3wX9bLk2NcV7aPz1RyE5sGh8Jd"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fixture_case(path: Path) -> None:
    case = read_case(path)
    reply = WireReply.from_case(case)
    check(ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply), case["expect"])


# --- helpers: chat wire replies ----------------------------------------------------------------


def tool_call(call_id: str | None, name: str, arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": raw}}
    if call_id is not None:
        call["id"] = call_id
    return call


def completion(
    *calls: dict[str, Any],
    content: str | None = None,
    refusal: str | None = None,
    finish: str | None = "tool_calls",
    **extra: Any,
) -> WireReply:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": refusal,
        "annotations": [],
        **extra,
    }
    if calls:
        message["tool_calls"] = list(calls)
    body = {
        "id": RESPONSE_ID,
        "object": "chat.completion",
        "created": 1764494100,
        "model": "gpt-5.1-2025-11-13",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return WireReply(kind="response", http_status=200, body=body)


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A chunk of a stream requested without ``include_usage`` (no ``usage`` key) unless
    ``usage=None`` is passed, which announces a final usage chunk."""
    data: dict[str, Any] = {
        "id": RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": 1764494100,
        "model": "gpt-5.1-2025-11-13",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
        **extra,
    }
    return {"event": None, "data": data}


def usage_chunk(prompt: int = 300, completion: int = 40) -> dict[str, Any]:
    event = chunk()
    event["data"]["choices"] = []
    event["data"]["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    return event


def fragment(index: int, arguments: str, call_id: str | None = None, name: str | None = None):
    part: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        part["id"] = call_id
        part["type"] = "function"
    if name is not None:
        part["function"]["name"] = name
    return chunk({"tool_calls": [part]})


def streamed(*events: dict[str, Any]) -> WireReply:
    return WireReply(kind="stream", http_status=200, events=list(events))


def result(call_id: str, name: str = "get_order", **kwargs: Any) -> ToolResultMessage:
    return ToolResultMessage(
        call_id=call_id,
        name=name,
        model_result=kwargs.pop("model_result", {"status": "ok"}),
        is_error=False,
        **kwargs,
    )


# --- parsing -----------------------------------------------------------------------------------


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
    parsed = ADAPTER.parse_reply(completion(tool_call("call_1", "get_order", raw)))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments == arguments
    assert parsed.calls[0].arguments_error is error


def test_arguments_that_are_not_a_string_are_an_argument_error() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": {}}}
    parsed = ADAPTER.parse_reply(completion(call))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments is None and parsed.calls[0].arguments_error


def test_cut_off_arguments_truncate_whatever_the_finish_reason() -> None:
    parsed = ADAPTER.parse_reply(completion(tool_call("call_1", "get_order", '{"order_id":"OR')))
    assert parsed.outcome is Outcome.TRUNCATED
    assert parsed.raw_reason == "tool_calls"
    assert parsed.calls == ()


def test_stop_with_tool_calls_still_proposes_them() -> None:
    parsed = ADAPTER.parse_reply(
        completion(tool_call("call_1", "get_order", {"order_id": "ORD-1"}), finish="stop")
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.raw_reason == "stop"


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (completion(finish="stop"), Outcome.MALFORMED),  # neither text nor calls
        (completion(content="", finish="stop"), Outcome.MALFORMED),
        (completion(content="Done.", finish="tool_calls"), Outcome.MALFORMED),
        (completion(content="Done.", finish=None), Outcome.MALFORMED),  # no explicit completion
        (completion(content="Done.", finish="eos"), Outcome.MALFORMED),  # unknown reason
        (completion(content="Done.", finish="stop"), Outcome.FINAL_TEXT),
        (completion(content="Refunds take", finish="length"), Outcome.TRUNCATED),
        (completion(content="Part", finish="content_filter"), Outcome.REFUSAL),
        (
            completion(tool_call("call_1", "get_order", "{}"), finish="content_filter"),
            Outcome.REFUSAL,
        ),
    ],
)
def test_only_an_explicit_completion_is_final_text(reply: WireReply, outcome: Outcome) -> None:
    parsed = ADAPTER.parse_reply(reply)
    assert parsed.outcome is outcome
    if outcome is not Outcome.TOOL_PROPOSALS:
        assert parsed.calls == ()


def test_refusal_text_follows_the_content() -> None:
    parsed = ADAPTER.parse_reply(completion(content="Sorry. ", refusal="I can't.", finish="stop"))
    assert parsed.outcome is Outcome.REFUSAL
    assert parsed.text == "Sorry. I can't."


def test_error_body_inside_a_200_is_an_api_failure() -> None:
    reply = WireReply(
        kind="response",
        http_status=200,
        body={"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},
    )
    parsed = ADAPTER.parse_reply(reply)
    assert parsed.outcome is Outcome.API_FAILURE
    assert parsed.raw_reason == "server_error"
    assert parsed.retryable is True
    assert parsed.error_message == "boom"


@pytest.mark.parametrize(
    ("status", "headers", "error", "retryable", "delay"),
    [
        (429, {"retry-after-ms": "1500"}, {"type": "requests", "code": "rate_limit_exceeded"},
         True, 1.5),
        (429, {"retry-after": "20"}, {"type": "insufficient_quota", "code": "insufficient_quota"},
         False, None),
        (500, {}, {"type": "server_error", "code": None}, True, None),
        (401, {}, {"type": "invalid_request_error", "code": "invalid_api_key"}, False, None),
    ],
)  # fmt: skip
def test_http_errors(
    status: int, headers: dict[str, str], error: dict[str, Any], retryable: bool, delay: Any
) -> None:
    body = {"error": {"message": "m", "param": None, **error}}
    parsed = ADAPTER.parse_reply(
        WireReply(kind="http_error", http_status=status, headers=headers, body=body)
    )
    assert parsed.outcome is Outcome.API_FAILURE
    assert parsed.raw_reason == (error["code"] or error["type"])
    assert parsed.retryable is retryable
    assert parsed.retry_after_s == delay
    assert parsed.response_id is None


def test_calls_without_an_id_get_stable_distinct_synthesized_ids() -> None:
    reply = completion(
        tool_call(None, "get_order", {"order_id": "ORD-1"}),
        tool_call(None, "get_order", {"order_id": "ORD-2"}),
    )
    first, again = ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply)
    ids = [c.call_id for c in first.calls]
    assert all(c.synthesized for c in first.calls)
    assert len(set(ids)) == 2 and all(ids)
    assert ids == [c.call_id for c in again.calls]
    assert first.calls[0].arguments == {"order_id": "ORD-1"}


def test_legacy_function_call_is_a_call_with_a_synthesized_id() -> None:
    reply = completion(
        finish="function_call",
        function_call={"name": "get_order", "arguments": '{"order_id":"ORD-1"}'},
    )
    parsed = ADAPTER.parse_reply(reply)
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    (call,) = parsed.calls
    assert call.synthesized and call.name == "get_order"
    conversation = ADAPTER.append_reply(
        conversation=ADAPTER.start_conversation(user_input="hi"), reply=parsed
    )
    assert conversation[-1]["function_call"] == {
        "name": "get_order",
        "arguments": '{"order_id":"ORD-1"}',
    }
    conversation = ADAPTER.append_results(
        conversation=conversation, results=[result(call.call_id, synthesized=True)]
    )
    assert conversation[-1] == {
        "role": "function",
        "name": "get_order",
        "content": '{"status":"ok"}',
    }
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert request_error(request=request, previous=parsed) is None


# --- requests, replies and results --------------------------------------------------------------


def test_request_offers_tools_and_replays_conversation() -> None:
    tool = ToolDeclaration(name="get_order", description="d", parameters={"type": "object"})
    conversation = ADAPTER.start_conversation(user_input="hello")
    body = ADAPTER.build_request(model="m", conversation=conversation, tools=[tool])
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_order",
                    "description": "d",
                    "parameters": {"type": "object"},
                    "strict": False,
                },
            }
        ],
    }
    # stream / stream_options belong to the transport; an empty tools array is a 400.
    assert ADAPTER.build_request(model="m", conversation=conversation, tools=[]) == {
        "model": "m",
        "messages": [{"role": "user", "content": "hello"}],
    }


def test_results_follow_the_assistant_message_in_call_order() -> None:
    case = read_case(FIXTURES / "providers" / "openai_chat" / "three_calls_one_turn.json")
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    conversation = ADAPTER.append_reply(
        conversation=ADAPTER.start_conversation(user_input="x"), reply=parsed
    )
    wire = case["body"]["choices"][0]["message"]
    # The assistant message comes back with its tool_calls verbatim; response-only fields
    # (annotations) stay out.
    assert conversation[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": wire["tool_calls"],
    }
    results = [
        result(c.call_id, c.name, model_result={"status": "ok", "data": {"n": i}})
        for i, c in enumerate(parsed.calls)
    ]
    conversation = ADAPTER.append_results(conversation=conversation, results=results)
    assert conversation[2:] == [
        {
            "role": "tool",
            "tool_call_id": call["id"],
            "content": json.dumps({"status": "ok", "data": {"n": i}}, separators=(",", ":")),
        }
        for i, call in enumerate(wire["tool_calls"])
    ]
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert request_error(request=request, previous=parsed) is None


def test_error_envelopes_go_back_as_the_tool_message_content() -> None:
    envelope = {"status": "error", "error": {"code": "UNKNOWN_TOOL", "message": "no such tool"}}
    conversation = ADAPTER.append_results(
        conversation=[],
        results=[
            ToolResultMessage(call_id="call_1", name="x", model_result=envelope, is_error=True)
        ],
    )
    assert conversation == [
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": json.dumps(envelope, separators=(",", ":")),
        }
    ]


def test_synthesized_ids_are_not_sent_as_tool_call_ids() -> None:
    reply = completion(tool_call(None, "get_order", "{}"), tool_call(None, "search_faq", "{}"))
    parsed = ADAPTER.parse_reply(reply)
    conversation = ADAPTER.append_reply(conversation=[], reply=parsed)
    assert all("id" not in call for call in conversation[0]["tool_calls"])
    conversation = ADAPTER.append_results(
        conversation=conversation,
        results=[result(c.call_id, c.name, synthesized=True) for c in parsed.calls],
    )
    assert conversation[1:] == [
        {"role": "tool", "name": "get_order", "content": '{"status":"ok"}'},
        {"role": "tool", "name": "search_faq", "content": '{"status":"ok"}'},
    ]
    assert request_error(request={"messages": conversation}, previous=parsed) is None
    short = {"messages": conversation[:2]}
    problem = request_error(request=short, previous=parsed)
    assert problem is not None and problem.http_status == 400


# --- request_error -------------------------------------------------------------------------------

USER = {"role": "user", "content": "hi"}
TWO_CALLS = completion(
    tool_call("call_a", "get_order", "{}"), tool_call("call_b", "get_order", "{}")
)
PREVIOUS = ADAPTER.parse_reply(TWO_CALLS)
ASSISTANT = PREVIOUS.assistant_items[0]


def tool_message(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "{}"}


def _error(messages: list[Any], previous: ParsedReply = PREVIOUS) -> tuple[str, Any] | None:
    problem = request_error(request={"messages": messages}, previous=previous)
    if problem is None:
        return None
    assert problem.kind == "http_error" and problem.http_status == 400
    error = problem.body["error"]
    assert error["type"] == "invalid_request_error"
    return error["message"], error["param"]


MISSING = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. The following tool_call_ids did not have response messages: "
)
ORPHAN = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
    "with 'tool_calls'."
)


def test_every_call_answered_once_is_accepted() -> None:
    assert _error([USER, ASSISTANT, tool_message("call_a"), tool_message("call_b")]) is None
    # Results may come in any order inside the run of tool messages.
    assert _error([USER, ASSISTANT, tool_message("call_b"), tool_message("call_a")]) is None


def test_unanswered_call_at_the_end() -> None:
    assert _error([USER, ASSISTANT, tool_message("call_a")]) == (MISSING + "call_b", "messages")
    assert _error([USER, ASSISTANT]) == (MISSING + "call_a, call_b", "messages")


def test_tool_messages_must_immediately_follow_the_assistant_message() -> None:
    messages = [USER, ASSISTANT, tool_message("call_a"), USER, tool_message("call_b")]
    assert _error(messages) == (MISSING + "call_b", "messages.[3].role")


def test_tool_message_without_a_preceding_tool_calls_message() -> None:
    assert _error([USER, tool_message("call_a")]) == (ORPHAN, "messages.[1].role")


def test_result_for_an_unknown_call() -> None:
    messages = [
        USER,
        ASSISTANT,
        tool_message("call_a"),
        tool_message("call_b"),
        tool_message("call_z"),
    ]
    assert _error(messages) == (
        "Invalid parameter: 'tool_call_id' of 'call_z' not found in 'tool_calls' of previous "
        "message.",
        "messages.[4].tool_call_id",
    )


def test_call_answered_twice() -> None:
    messages = [USER, ASSISTANT, tool_message("call_a"), tool_message("call_a")]
    assert _error(messages) == (
        "Invalid parameter: Duplicate value for 'tool_call_id' of 'call_a', in messages[2] and "
        "messages[3].",
        "messages.[3].tool_call_id",
    )


def test_tool_message_without_tool_call_id() -> None:
    messages = [USER, ASSISTANT, {"role": "tool", "content": "{}"}]
    assert _error(messages) == (
        "Missing required parameter: 'messages.[2].tool_call_id'.",
        "messages.[2].tool_call_id",
    )


def test_assistant_message_left_out_leaves_the_calls_unanswered() -> None:
    assert _error([USER]) == (MISSING + "call_a, call_b", "messages")
    # Dropping it but keeping the results makes them orphans.
    assert _error([USER, tool_message("call_a"), tool_message("call_b")]) == (
        ORPHAN,
        "messages.[1].role",
    )


def test_earlier_turns_are_checked_too() -> None:
    earlier = {
        "role": "assistant",
        "content": None,
        "tool_calls": [tool_call("call_0", "get_order", "{}")],
    }
    messages = [USER, earlier, USER, ASSISTANT, tool_message("call_a"), tool_message("call_b")]
    assert _error(messages) == (MISSING + "call_0", "messages.[2].role")


def test_reasoning_content_must_come_back_where_the_server_sent_it() -> None:
    reply = completion(tool_call("call_a", "get_order", "{}"), reasoning_content="Look it up.")
    previous = ADAPTER.parse_reply(reply)
    assert previous.continuation == frozenset()  # no continuation kind is defined for chat
    conversation = ADAPTER.append_reply(conversation=[USER], reply=previous)
    assert conversation[1]["reasoning_content"] == "Look it up."
    conversation = ADAPTER.append_results(conversation=conversation, results=[result("call_a")])
    assert _error(conversation, previous) is None
    stripped = [USER, {k: v for k, v in conversation[1].items() if k != "reasoning_content"}]
    assert _error([*stripped, tool_message("call_a")], previous) == (
        "Missing `reasoning_content` field in the assistant message at message index 1. For "
        "more information, please refer to "
        "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
        None,
    )


def test_nothing_to_check_after_a_reply_without_calls() -> None:
    previous = ADAPTER.parse_reply(completion(content="Done.", finish="stop"))
    assert _error([USER], previous) is None


# --- streams -------------------------------------------------------------------------------------


def test_interleaved_fragments_are_kept_apart_by_index() -> None:
    parsed = ADAPTER.parse_reply(
        streamed(
            chunk({"role": "assistant", "content": None}),
            fragment(0, "", "call_a", "get_order"),
            fragment(1, "", "call_b", "get_shipment_status"),
            fragment(0, '{"order_id":'),
            fragment(1, '{"tracking_number":'),
            fragment(1, '"TRK-1"}'),
            fragment(0, '"ORD-1"}'),
            chunk(finish="tool_calls"),
            usage_chunk(),
        )
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert [(c.call_id, c.name, c.arguments) for c in parsed.calls] == [
        ("call_a", "get_order", {"order_id": "ORD-1"}),
        ("call_b", "get_shipment_status", {"tracking_number": "TRK-1"}),
    ]
    assert parsed.usage is not None and parsed.usage.input_tokens == 300
    assert parsed.assistant_items[0]["tool_calls"][0] == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "get_order", "arguments": '{"order_id":"ORD-1"}'},
    }


def test_a_new_id_at_a_used_index_starts_a_new_call() -> None:
    parsed = ADAPTER.parse_reply(
        streamed(
            fragment(0, "", "call_a", "get_order"),
            fragment(0, '{"order_id":"ORD-1"}'),
            fragment(0, "", "call_b", "get_order"),
            fragment(0, '{"order_id":"ORD-2"}'),
            chunk(finish="tool_calls"),
        )
    )
    assert [(c.call_id, c.arguments) for c in parsed.calls] == [
        ("call_a", {"order_id": "ORD-1"}),
        ("call_b", {"order_id": "ORD-2"}),
    ]


def test_the_same_id_repeated_at_its_index_continues_the_call() -> None:
    parsed = ADAPTER.parse_reply(
        streamed(
            fragment(0, '{"order_id":', "call_a", "get_order"),
            fragment(0, '"ORD-1"}', "call_a", "get_order"),
            chunk(finish="tool_calls"),
        )
    )
    assert [(c.call_id, c.name, c.arguments) for c in parsed.calls] == [
        ("call_a", "get_order", {"order_id": "ORD-1"})
    ]


def test_argument_overflow_marks_only_that_call() -> None:
    assembler = ADAPTER.stream_assembler(max_argument_bytes=32)
    events = [
        fragment(0, "", "call_a", "get_order"),
        fragment(1, "", "call_b", "search_faq"),
        fragment(0, '{"order_id":"ORD-1"}'),
        fragment(1, '{"query":"' + "x" * 40 + '"}'),
        chunk(finish="tool_calls"),
    ]
    for event in events:
        assembler.feed(event)
    parsed = assembler.finish()
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    first, second = parsed.calls
    assert first.arguments == {"order_id": "ORD-1"} and not first.arguments_error
    assert second.arguments is None and second.arguments_error
    assert second.raw_arguments == OVERFLOW_MARKER


def test_every_cut_of_a_stream_is_truncated_and_hands_over_nothing() -> None:
    case = read_case(FIXTURES / "providers" / "openai_chat" / "stream_two_calls.json")
    finish_at = next(
        i for i, e in enumerate(case["events"]) if e["data"]["choices"][0]["finish_reason"]
    )
    for cut in range(finish_at + 1):
        parsed = ADAPTER.parse_reply(streamed(*case["events"][:cut]))
        assert parsed.outcome is Outcome.TRUNCATED
        assert parsed.raw_reason is None
        assert parsed.calls == ()
    # The finish chunk ends the reply; a lost usage chunk after it only loses the counts.
    parsed = ADAPTER.parse_reply(streamed(*case["events"][: finish_at + 1]))
    assert (parsed.outcome, parsed.raw_reason) == (Outcome.TOOL_PROPOSALS, "tool_calls")
    assert len(parsed.calls) == 2
    done = {"event": None, "data": "[DONE]"}
    parsed = ADAPTER.parse_reply(streamed(*case["events"], done))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS and len(parsed.calls) == 2


def test_the_finish_chunk_ends_the_reply_and_a_later_usage_chunk_is_read() -> None:
    events = [fragment(0, '{"order_id":"ORD-1"}', "call_a", "get_order"), chunk(finish="stop")]
    parsed = ADAPTER.parse_reply(streamed(*events))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS and parsed.usage is None
    announced = [chunk(finish=None, usage=None), *events]
    assert ADAPTER.parse_reply(streamed(*announced)).outcome is Outcome.TOOL_PROPOSALS
    parsed = ADAPTER.parse_reply(
        streamed(*announced, usage_chunk(), {"event": None, "data": "[DONE]"})
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.usage is not None and parsed.usage.output_tokens == 40


def test_progress_notes_name_each_call_once() -> None:
    assembler = ADAPTER.stream_assembler(max_argument_bytes=1024)
    notes = [
        assembler.feed(event)
        for event in (
            chunk({"role": "assistant", "content": "Checking."}),
            fragment(0, "", "call_a", "get_order"),
            fragment(0, '{"order_id":"ORD-1"}', "call_a", "get_order"),
            fragment(1, "", "call_b", "search_faq"),
            chunk(finish="tool_calls"),
        )
    ]
    assert notes == [None, "get_order", None, "search_faq", None]


def test_error_frame_is_an_api_failure_and_drops_the_text() -> None:
    parsed = ADAPTER.parse_reply(
        streamed(
            chunk({"role": "assistant", "content": "Let me"}),
            fragment(0, '{"order_id":"ORD-1"}', "call_a", "get_order"),
            {
                "event": None,
                "data": {"error": {"message": "overloaded", "type": "server_error", "code": None}},
            },
        )
    )
    assert parsed.outcome is Outcome.API_FAILURE
    assert parsed.raw_reason == "server_error"
    assert parsed.retryable is True
    assert parsed.text is None and parsed.calls == ()
    assert parsed.response_id == RESPONSE_ID


def test_streamed_text_refusal_and_length() -> None:
    final = ADAPTER.parse_reply(
        streamed(
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "All "}),
            chunk({"content": "done."}),
            chunk(finish="stop"),
            usage_chunk(),
        )
    )
    assert (final.outcome, final.text, final.raw_reason) == (
        Outcome.FINAL_TEXT,
        "All done.",
        "stop",
    )
    refused = ADAPTER.parse_reply(
        streamed(
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": "I can't "}),
            chunk({"refusal": "help with that."}),
            chunk(finish="stop"),
        )
    )
    assert (refused.outcome, refused.text) == (Outcome.REFUSAL, "I can't help with that.")
    cut = ADAPTER.parse_reply(
        streamed(fragment(0, '{"order_id":"ORD-1"}', "call_a", "get_order"), chunk(finish="length"))
    )
    assert (cut.outcome, cut.raw_reason, cut.calls) == (Outcome.TRUNCATED, "length", ())


def test_stream_and_response_of_the_same_reply_agree() -> None:
    body_reply = completion(tool_call("call_a", "get_order", {"order_id": "ORD-1"}), content="Hi")
    stream_reply = streamed(
        chunk({"role": "assistant", "content": "Hi"}),
        fragment(0, '{"order_id": "ORD-1"}', "call_a", "get_order"),
        chunk(finish="tool_calls"),
    )
    a, b = ADAPTER.parse_reply(body_reply), ADAPTER.parse_reply(stream_reply)
    assert (a.outcome, a.text, a.calls[0].call_id, a.calls[0].arguments) == (
        b.outcome,
        b.text,
        b.calls[0].call_id,
        b.calls[0].arguments,
    )


# --- bundled scenarios ---------------------------------------------------------------------------

SCENARIOS = Path(__file__).resolve().parents[2] / "toolcalls" / "demo" / "scenarios" / "openai_chat"


def _replies(name: str) -> list[ParsedReply]:
    scenario = json.loads((SCENARIOS / name).read_text(encoding="utf-8"))
    assert scenario["family"] == "openai_chat"
    return [
        ADAPTER.parse_reply(WireReply.from_case(reply)) for reply in scripted(scenario["replies"])
    ]


def test_streamed_scenario_reads_like_the_non_streamed_one() -> None:
    plain, streamed_replies = (
        _replies("refund_approve.json"),
        _replies("refund_approve_stream.json"),
    )
    assert [r.outcome for r in plain] == [Outcome.TOOL_PROPOSALS] * 3 + [Outcome.FINAL_TEXT]
    for a, b in zip(plain, streamed_replies, strict=True):
        assert (a.outcome, a.raw_reason, a.response_id, a.text, a.calls, a.usage) == (
            b.outcome,
            b.raw_reason,
            b.response_id,
            b.text,
            b.calls,
            b.usage,
        )
        assert a.assistant_items == b.assistant_items


def test_replay_transport_answers_a_bad_pairing_with_the_chat_400() -> None:
    scenario = json.loads((SCENARIOS / "refund_approve.json").read_text(encoding="utf-8"))
    transport = ReplayTransport(adapter=ADAPTER, replies=scenario["replies"])
    first = ADAPTER.parse_reply(transport.send(request={"messages": [USER]}, turn=0))
    conversation = ADAPTER.append_reply(conversation=[USER], reply=first)
    good = ADAPTER.append_results(
        conversation=conversation, results=[result(first.calls[0].call_id)]
    )
    assert transport.send(request={"messages": good}, turn=1).http_status == 200
    problem = transport.send(request={"messages": conversation}, turn=1)
    assert problem.http_status == 400
    assert problem.body["error"]["message"] == MISSING + first.calls[0].call_id
