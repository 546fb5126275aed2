"""Anthropic Messages adapter: fixture conformance, request building, result shaping, pairing
rules with the API's own 400 texts, and stream assembly."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from providers.anthropic_messages import AnthropicMessagesAdapter
from providers.anthropic_messages.rules import request_error
from providers.base import Outcome, ParsedReply, ToolDeclaration, ToolResultMessage, WireReply
from providers.replay import ReplayTransport
from providers.streaming import OVERFLOW_MARKER
from tests.conftest import FIXTURES
from tests.providers.conformance import check, load_cases, read_case
from toolcalls.demo.scenario import bundled_path

ADAPTER = AnthropicMessagesAdapter()
CASES = load_cases(FIXTURES, "anthropic_messages")
SIGNATURE = "EqQBCkYIBxgCKkBsignatureOfTheThinkingBlock=="


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fixture_case(path: Path) -> None:
    case = read_case(path)
    reply = WireReply.from_case(case)
    check(ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply), case["expect"])


# --- helpers ------------------------------------------------------------------------------


def _case(name: str) -> dict[str, Any]:
    return read_case(FIXTURES / "providers" / "anthropic_messages" / f"{name}.json")


def _message(*content: dict[str, Any], stop_reason: str | None = "tool_use") -> WireReply:
    body = {
        "id": "msg_01TestTestTestTestTest01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
    return WireReply(kind="response", http_status=200, body=body)


def _tool_use(call_id: str, name: str = "get_order", arguments: Any = None) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": name,
        "input": {"order_id": "ORD-1"} if arguments is None else arguments,
    }


def _thinking(words: str = "Look the order up first.") -> dict[str, Any]:
    return {"type": "thinking", "thinking": words, "signature": SIGNATURE}


def _event(name: str, **data: Any) -> dict[str, Any]:
    return {"event": name, "data": {"type": name, **data}}


def _start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return _event("content_block_start", index=index, content_block=block)


def _json(index: int, partial: str) -> dict[str, Any]:
    return _event(
        "content_block_delta",
        index=index,
        delta={"type": "input_json_delta", "partial_json": partial},
    )


def _stop(index: int) -> dict[str, Any]:
    return _event("content_block_stop", index=index)


def _opening(input_tokens: int = 50) -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": "msg_01StreamStreamStream01",
        "type": "message",
        "role": "assistant",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    return _event("message_start", message=message)


def _closing(stop_reason: str = "tool_use", output_tokens: int = 30) -> list[dict[str, Any]]:
    return [
        _event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        _event("message_stop"),
    ]


def _tool_start(call_id: str, name: str = "get_order", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}, **extra}


def _stream(*events: dict[str, Any], max_bytes: int = 1024 * 1024) -> ParsedReply:
    return ADAPTER.parse_reply(
        WireReply(kind="stream", http_status=200, events=list(events)), max_argument_bytes=max_bytes
    )


def _result(call_id: str, data: dict[str, Any], *, is_error: bool = False) -> ToolResultMessage:
    envelope = {"status": "error", "error": data} if is_error else {"status": "ok", "data": data}
    return ToolResultMessage(
        call_id=call_id, name="get_order", model_result=envelope, is_error=is_error
    )


def _continue(
    reply: WireReply, results: list[ToolResultMessage] | None = None
) -> tuple[dict[str, Any], ParsedReply]:
    """(request for the turn after ``reply``, parsed ``reply``), built the way the engine does."""
    parsed = ADAPTER.parse_reply(reply)
    conversation = ADAPTER.start_conversation(user_input="Where is ORD-1?")
    conversation = ADAPTER.append_reply(conversation=conversation, reply=parsed)
    if results is None:
        results = [_result(call.call_id, {"n": i}) for i, call in enumerate(parsed.calls)]
    conversation = ADAPTER.append_results(conversation=conversation, results=results)
    return ADAPTER.build_request(model="m", conversation=conversation, tools=[]), parsed


def _error_text(request: dict[str, Any], previous: ParsedReply) -> str | None:
    problem = request_error(request=request, previous=previous)
    if problem is None:
        return None
    assert problem.kind == "http_error" and problem.http_status == 400
    assert problem.body["type"] == "error"
    assert problem.body["error"]["type"] == "invalid_request_error"
    assert problem.body["request_id"].startswith("req_011C")
    assert problem.headers["request-id"] == problem.body["request_id"]
    return str(problem.body["error"]["message"])


# --- requests and conversation ------------------------------------------------------------


def test_request_has_max_tokens_and_tools_with_input_schema() -> None:
    tool = ToolDeclaration(
        name="get_order",
        description="Look up one order.",
        parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
    )
    conversation = ADAPTER.start_conversation(user_input="hello")
    body = ADAPTER.build_request(model="claude-x", conversation=conversation, tools=[tool])
    assert body == {
        "model": "claude-x",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hello"}],
        "tools": [
            {
                "name": "get_order",
                "description": "Look up one order.",
                "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
            }
        ],
    }


def test_reply_is_replayed_verbatim_and_results_come_first_in_one_user_message() -> None:
    case = _case("thinking_then_tool_use")
    call_id = case["expect"]["calls"][0]["call_id"]
    results = [_result(call_id, {"code": "ORDER_NOT_FOUND", "message": "no"}, is_error=True)]
    request, parsed = _continue(WireReply.from_case(case), results)
    user, assistant, answer = request["messages"]
    assert user == {"role": "user", "content": "Where is ORD-1?"}
    # The content array comes back unchanged: thinking with its signature, then the tool_use.
    assert assistant == {"role": "assistant", "content": case["body"]["content"]}
    assert answer == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": '{"status":"error","error":{"code":"ORDER_NOT_FOUND","message":"no"}}',
                "is_error": True,
            }
        ],
    }
    assert _error_text(request, parsed) is None


def test_parallel_results_share_one_user_message_and_carry_only_model_result() -> None:
    request, parsed = _continue(WireReply.from_case(_case("three_tool_uses")))
    answer = request["messages"][-1]
    assert answer["role"] == "user"
    assert [block["tool_use_id"] for block in answer["content"]] == [
        call.call_id for call in parsed.calls
    ]
    assert all("is_error" not in block for block in answer["content"])
    assert [json.loads(block["content"]) for block in answer["content"]] == [
        {"status": "ok", "data": {"n": i}} for i in range(3)
    ]
    assert _error_text(request, parsed) is None


def test_paused_turn_goes_back_unchanged_without_results() -> None:
    case = _case("pause_turn_web_search")
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    assert parsed.outcome is Outcome.PAUSED and parsed.calls == ()
    conversation = ADAPTER.append_reply(
        conversation=ADAPTER.start_conversation(user_input="Any carrier notices?"), reply=parsed
    )
    assert conversation[-1] == {"role": "assistant", "content": case["body"]["content"]}
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert _error_text(request, parsed) is None


# --- request_error: the API's rules and texts ---------------------------------------------


def _two_calls() -> WireReply:
    return _message(_thinking(), _tool_use("toolu_A"), _tool_use("toolu_B"))


def test_a_call_without_result_gets_the_missing_tool_result_400() -> None:
    request, parsed = _continue(_two_calls(), [_result("toolu_A", {})])
    assert _error_text(request, parsed) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_B. Each `tool_use` block must have a corresponding `tool_result` block in the next "
        "message."
    )
    request, parsed = _continue(_two_calls(), [])
    assert _error_text(request, parsed) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_A, toolu_B. Each `tool_use` block must have a corresponding `tool_result` block in "
        "the next message."
    )


def test_a_result_for_an_unknown_call_gets_the_unexpected_tool_use_id_400() -> None:
    results = [_result("toolu_A", {}), _result("toolu_B", {}), _result("toolu_Z", {})]
    request, parsed = _continue(_two_calls(), results)
    assert _error_text(request, parsed) == (
        "messages.2.content.2: unexpected `tool_use_id` found in `tool_result` blocks: toolu_Z. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message."
    )


def test_a_call_answered_twice_gets_the_single_result_400() -> None:
    results = [_result("toolu_A", {}), _result("toolu_B", {}), _result("toolu_A", {})]
    request, parsed = _continue(_two_calls(), results)
    assert _error_text(request, parsed) == (
        "messages.2.content.2: each tool_use must have a single result. Found multiple "
        "`tool_result` blocks with id: toolu_A"
    )


def test_text_before_the_results_gets_the_results_first_400() -> None:
    request, parsed = _continue(_two_calls())
    request["messages"][-1]["content"].insert(0, {"type": "text", "text": "Here you go."})
    assert _error_text(request, parsed) == (
        "messages.2: Did not find 2 `tool_result` block(s) at the beginning of this message. "
        "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
        "blocks."
    )
    # Text after all results is fine.
    request["messages"][-1]["content"].append(request["messages"][-1]["content"].pop(0))
    assert _error_text(request, parsed) is None


def test_results_in_a_later_message_are_not_immediately_after() -> None:
    request, parsed = _continue(_two_calls())
    results = request["messages"].pop()
    request["messages"] += [{"role": "user", "content": "and?"}, results]
    message = _error_text(request, parsed)
    assert message is not None
    assert message.startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_A, toolu_B."
    )


def test_dropped_thinking_gets_the_thinking_first_400() -> None:
    request, parsed = _continue(_two_calls())
    request["messages"][1]["content"].pop(0)
    assert _error_text(request, parsed) == (
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). To "
        "avoid this requirement, disable `thinking`."
    )


def test_changed_thinking_gets_the_cannot_be_modified_400() -> None:
    request, parsed = _continue(_two_calls())
    request["messages"][1]["content"][0]["signature"] = "EqQBforged=="
    assert _error_text(request, parsed) == (
        "messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant "
        "message cannot be modified. These blocks must remain as they were in the original "
        "response."
    )


def test_redacted_thinking_counts_as_thinking() -> None:
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}
    reply = _message(redacted, _tool_use("toolu_A"))
    request, parsed = _continue(reply)
    assert parsed.continuation == frozenset({"redacted_thinking"})
    assert _error_text(request, parsed) is None
    request["messages"][1]["content"][0]["data"] = "changed"
    message = _error_text(request, parsed)
    assert message is not None and message.startswith("messages.1.content.0: `thinking` or")


def test_no_thinking_rule_without_thinking_in_the_previous_reply() -> None:
    request, parsed = _continue(_message(_tool_use("toolu_A")))
    assert _error_text(request, parsed) is None


def test_a_left_out_assistant_turn_leaves_the_calls_unanswered() -> None:
    parsed = ADAPTER.parse_reply(_two_calls())
    request = ADAPTER.build_request(
        model="m", conversation=ADAPTER.start_conversation(user_input="hi"), tools=[]
    )
    message = _error_text(request, parsed)
    assert message is not None
    assert "ids were found without `tool_result` blocks immediately after: toolu_A, toolu_B" in (
        message
    )


def test_the_400_is_deterministic_and_reads_as_a_permanent_failure() -> None:
    request, parsed = _continue(_two_calls(), [])
    first = request_error(request=request, previous=parsed)
    again = request_error(request=copy.deepcopy(request), previous=parsed)
    assert first is not None and first == again
    failure = ADAPTER.parse_reply(first)
    assert failure.outcome is Outcome.API_FAILURE
    assert failure.raw_reason == "invalid_request_error"
    assert failure.retryable is False


# --- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (_message({"type": "text", "text": "Done."}, stop_reason="stop_sequence"), "FINAL_TEXT"),
        (
            _message({"type": "text", "text": "Lo"}, stop_reason="model_context_window_exceeded"),
            "TRUNCATED",
        ),
        (_message(_tool_use("toolu_A"), stop_reason="max_tokens"), "TRUNCATED"),
        (_message(_tool_use("toolu_A"), stop_reason="end_turn"), "TOOL_PROPOSALS"),
        (_message({"type": "text", "text": "I will look."}, stop_reason="tool_use"), "MALFORMED"),
        (_message(_thinking(), stop_reason="end_turn"), "MALFORMED"),
        (_message({"type": "text", "text": "x"}, stop_reason="surprise"), "MALFORMED"),
        (_message({"type": "text", "text": "x"}, stop_reason=None), "MALFORMED"),
        (_message({"type": "tool_use", "name": "get_order", "input": {}}), "MALFORMED"),
        (_message(_tool_use("toolu_A"), stop_reason="refusal"), "REFUSAL"),
    ],
)
def test_classification(reply: WireReply, outcome: str) -> None:
    parsed = ADAPTER.parse_reply(reply)
    assert parsed.outcome.value == outcome
    if parsed.outcome is not Outcome.TOOL_PROPOSALS:
        assert parsed.calls == ()


@pytest.mark.parametrize("value", ['{"order_id": "ORD-1"}', ["ORD-1"], 7])
def test_an_input_that_is_not_an_object_is_an_argument_error(value: Any) -> None:
    parsed = ADAPTER.parse_reply(_message(_tool_use("toolu_A", arguments=value)))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments is None and parsed.calls[0].arguments_error


def test_no_coercion_of_argument_values() -> None:
    parsed = ADAPTER.parse_reply(_message(_tool_use("toolu_A", arguments={"amount_cents": "5999"})))
    assert parsed.calls[0].arguments == {"amount_cents": "5999"}
    assert parsed.calls[0].raw_arguments == '{"amount_cents":"5999"}'


def test_spend_limit_is_not_retried_but_overload_is() -> None:
    spend = WireReply(
        kind="http_error",
        http_status=429,
        headers={"retry-after": "30"},
        body={
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "monthly cap",
                "details": {"error_code": "enforced_spend_limit_reached"},
            },
        },
    )
    parsed = ADAPTER.parse_reply(spend)
    assert (parsed.outcome, parsed.retryable, parsed.retry_after_s) == (
        Outcome.API_FAILURE,
        False,
        None,
    )
    overloaded = ADAPTER.parse_reply(WireReply.from_case(_case("http_529_busy")))
    assert overloaded.retryable is True


# --- streams ------------------------------------------------------------------------------


def test_streamed_reply_rebuilds_the_same_content_as_the_message() -> None:
    case = _case("stream_signed_thinking_then_call")
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    thinking, tool_use = parsed.assistant_items
    assert thinking == {
        "type": "thinking",
        "thinking": (
            "The customer asked to cancel at the end of the current term, which ends on 31 January."
        ),
        "signature": case["events"][4]["data"]["delta"]["signature"],
    }
    assert tool_use == {
        "type": "tool_use",
        "id": case["expect"]["calls"][0]["call_id"],
        "name": "schedule_cancellation",
        "input": {"account_id": "ACCT-3316", "effective_on": "2027-01-31"},
        "caller": {"type": "direct"},
    }
    assert parsed.calls[0].raw_arguments == (
        '{"account_id": "ACCT-3316", "effective_on": "2027-01-31"}'
    )


def test_interleaved_blocks_are_kept_apart_by_index() -> None:
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A")),
        _start(1, _tool_start("toolu_B", "search_faq")),
        _json(1, '{"query": "ret'),
        _json(0, '{"order_id"'),
        _json(1, 'urns"}'),
        _json(0, ': "ORD-7"}'),
        _stop(1),
        _stop(0),
        *_closing(),
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert [(c.call_id, c.name, c.arguments) for c in parsed.calls] == [
        ("toolu_A", "get_order", {"order_id": "ORD-7"}),
        ("toolu_B", "search_faq", {"query": "returns"}),
    ]


def test_a_reused_index_starts_a_new_block() -> None:
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A")),
        _json(0, '{"order_id": "ORD-1"}'),
        _stop(0),
        _start(0, _tool_start("toolu_B")),
        _json(0, '{"order_id": "ORD-2"}'),
        _stop(0),
        *_closing(),
    )
    assert [(c.call_id, c.arguments) for c in parsed.calls] == [
        ("toolu_A", {"order_id": "ORD-1"}),
        ("toolu_B", {"order_id": "ORD-2"}),
    ]


def test_nothing_joined_falls_back_to_the_start_input() -> None:
    parsed = _stream(
        _opening(),
        _start(0, {"type": "tool_use", "id": "toolu_A", "name": "list_open_tickets", "input": {}}),
        _json(0, ""),
        _stop(0),
        _start(1, _tool_start("toolu_B", input={"order_id": "ORD-9"})),
        _stop(1),
        *_closing(),
    )
    assert [c.arguments for c in parsed.calls] == [{}, {"order_id": "ORD-9"}]


def test_a_call_past_the_byte_limit_carries_an_argument_error() -> None:
    big = json.dumps({"query": "x" * 200})
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A", "search_faq")),
        _json(0, big[:100]),
        _json(0, big[100:]),
        _stop(0),
        _start(1, _tool_start("toolu_B")),
        _json(1, '{"order_id": "ORD-1"}'),
        _stop(1),
        *_closing(),
        max_bytes=150,
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    over, fine = parsed.calls
    assert (over.arguments, over.arguments_error, over.raw_arguments) == (
        None,
        True,
        OVERFLOW_MARKER,
    )
    assert (fine.arguments, fine.arguments_error) == ({"order_id": "ORD-1"}, False)


def test_undecodable_streamed_arguments_stay_a_proposal_with_an_error() -> None:
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A")),
        _json(0, '{"a": 1}{"b": 2}'),
        _stop(0),
        *_closing(),
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments_error
    # The replayed block keeps a valid input object.
    assert parsed.assistant_items[0]["input"] == {}


@pytest.mark.parametrize(
    "case", ["stream_signed_thinking_then_call", "stream_max_tokens_mid_input"]
)
def test_every_cut_of_a_stream_is_truncated_and_hands_over_nothing(case: str) -> None:
    events = _case(case)["events"]
    for cut in range(len(events)):
        parsed = _stream(*events[:cut])
        assert parsed.outcome is Outcome.TRUNCATED, cut
        assert parsed.calls == ()
    assert _stream(*events[:-1]).raw_reason == _case(case)["expect"]["raw_reason"]


def test_message_stop_without_a_stop_reason_does_not_complete() -> None:
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A")),
        _json(0, '{"order_id": "ORD-1"}'),
        _stop(0),
        _event("message_stop"),
    )
    assert parsed.outcome is Outcome.TRUNCATED and parsed.raw_reason is None


def test_a_block_that_never_stopped_truncates_even_after_message_stop() -> None:
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A")),
        _json(0, '{"order_id": "ORD-1"}'),
        *_closing(),
    )
    assert parsed.outcome is Outcome.TRUNCATED and parsed.calls == ()


def test_cut_off_arguments_truncate_whatever_the_stop_reason() -> None:
    parsed = _stream(
        _opening(),
        _start(0, _tool_start("toolu_A")),
        _json(0, '{"order_id": "ORD-'),
        _stop(0),
        *_closing("tool_use"),
    )
    assert parsed.outcome is Outcome.TRUNCATED and parsed.raw_reason == "tool_use"


def test_an_error_event_is_an_api_failure_and_drops_the_text() -> None:
    parsed = _stream(
        _opening(input_tokens=70),
        _start(0, {"type": "text", "text": ""}),
        _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Let me"}),
        _event("error", error={"type": "overloaded_error", "message": "Overloaded"}),
    )
    assert parsed.outcome is Outcome.API_FAILURE
    assert (parsed.raw_reason, parsed.retryable, parsed.text) == ("overloaded_error", True, None)
    assert parsed.error_message == "Overloaded"
    assert parsed.response_id == "msg_01StreamStreamStream01"
    assert parsed.usage is not None and parsed.usage.input_tokens == 70
    invalid = _stream(_event("error", error={"type": "invalid_request_error", "message": "x"}))
    assert invalid.retryable is False


def test_usage_takes_input_from_message_start_and_output_from_the_latest_delta() -> None:
    parsed = _stream(
        _opening(input_tokens=40),
        _start(0, {"type": "text", "text": ""}),
        _event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi."}),
        _stop(0),
        _event("message_delta", delta={"stop_reason": None}, usage={"output_tokens": 5}),
        _event(
            "message_delta",
            delta={"stop_reason": "end_turn"},
            usage={"output_tokens": 9, "input_tokens": 44},
        ),
        _event("message_stop"),
    )
    assert parsed.outcome is Outcome.FINAL_TEXT and parsed.text == "Hi."
    assert parsed.usage is not None
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (44, 9)


def test_progress_notes_name_the_tool_when_its_block_starts() -> None:
    assembler = ADAPTER.stream_assembler(max_argument_bytes=1024)
    notes = [
        assembler.feed(event)
        for event in (
            _opening(),
            _start(0, _thinking()),
            _stop(0),
            _start(1, _tool_start("toolu_A", "create_refund_draft")),
            _json(1, '{"order_id": "ORD-1"'),
        )
    ]
    assert notes == [None, None, None, "create_refund_draft", None]
    # Announced, but not handed over: the stream has not finished.
    assert assembler.finish().calls == ()


# --- bundled scenarios through the replay transport ---------------------------------------


def _walk(name: str, *, drop_thinking: bool = False) -> list[ParsedReply]:
    """Drive a bundled scenario the way the engine does, answering every call with an ok
    envelope, and return the parsed replies (the replay transport runs ``request_error``)."""
    scenario = json.loads(bundled_path(family="anthropic_messages", name=name).read_text())
    transport = ReplayTransport(adapter=ADAPTER, replies=scenario["replies"])
    conversation = ADAPTER.start_conversation(user_input=scenario["input"])
    parsed_replies = []
    for turn in range(len(scenario["replies"])):
        request = ADAPTER.build_request(
            model=scenario["model"], conversation=conversation, tools=[]
        )
        parsed = ADAPTER.parse_reply(transport.send(request=request, turn=turn))
        parsed_replies.append(parsed)
        if parsed.outcome is not Outcome.TOOL_PROPOSALS:
            break
        conversation = ADAPTER.append_reply(conversation=conversation, reply=parsed)
        if drop_thinking:
            conversation[-1]["content"] = [
                b for b in conversation[-1]["content"] if b["type"] != "thinking"
            ]
        results = [_result(call.call_id, {"ok": True}) for call in parsed.calls]
        conversation = ADAPTER.append_results(conversation=conversation, results=results)
    return parsed_replies


@pytest.mark.parametrize("name", ["refund_approve", "refund_deny", "refund_approve_stream"])
def test_refund_scenarios_replay_cleanly_with_thinking(name: str) -> None:
    replies = _walk(name)
    assert [r.outcome for r in replies] == [Outcome.TOOL_PROPOSALS] * 3 + [Outcome.FINAL_TEXT]
    assert all(r.continuation == frozenset({"thinking"}) for r in replies[:3])
    assert [(c.name, c.arguments) for r in replies[:3] for c in r.calls] == [
        ("get_order", {"order_id": "ORD-1001"}),
        (
            "create_refund_draft",
            {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"},
        ),
        (
            "submit_refund",
            {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999},
        ),
    ]


def test_the_streamed_scenario_matches_the_plain_one() -> None:
    plain, streamed = _walk("refund_approve"), _walk("refund_approve_stream")
    assert [r.assistant_items for r in plain] == [r.assistant_items for r in streamed]
    assert [r.text for r in plain] == [r.text for r in streamed]


def test_dropping_thinking_from_a_scenario_is_answered_with_the_providers_400() -> None:
    replies = _walk("refund_approve", drop_thinking=True)
    failure = replies[-1]
    assert failure.outcome is Outcome.API_FAILURE and failure.raw_reason == "invalid_request_error"
    assert failure.error_message is not None
    assert failure.error_message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`."
    )
