"""Gemini generateContent adapter: fixture conformance, request building, result shaping,
synthesized call IDs, stream assembly and Gemini's own 400s for a broken history."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from providers.base import (
    Outcome,
    ParsedReply,
    ToolDeclaration,
    ToolResultMessage,
    WireReply,
)
from providers.gemini_generate import GeminiGenerateAdapter
from providers.gemini_generate.rules import (
    CALL_NOT_AFTER_USER,
    COUNT_MISMATCH,
    RESPONSE_NOT_AFTER_CALL,
    request_error,
)
from providers.streaming import OVERFLOW_MARKER
from tests.conftest import FIXTURES, REPO
from tests.providers.conformance import check, load_cases, read_case
from tests.replies import scripted

ADAPTER = GeminiGenerateAdapter()
CASES = load_cases(FIXTURES, "gemini_generate")
SIGNATURE = "CqFxzsStlC1pgzdFuB7BAzhog2ovIATkVk27gMiMVgK3mcvxLNbVHBOklUVmVCpQVcBM"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fixture_case(path: Path) -> None:
    case = read_case(path)
    reply = WireReply.from_case(case)
    check(ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply), case["expect"])


# --- builders --------------------------------------------------------------------------------


def fcall(
    name: str, args: Any = None, *, call_id: str | None = None, signature: str | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name}
    if args is not None:
        call["args"] = args
    if call_id is not None:
        call["id"] = call_id
    part: dict[str, Any] = {"functionCall": call}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def body(
    *parts: dict[str, Any], finish: str | None = "STOP", response_id: str = "resp-1"
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20},
        "modelVersion": "gemini-3-pro-preview",
        "responseId": response_id,
    }


def parse(payload: dict[str, Any]) -> ParsedReply:
    return ADAPTER.parse_reply(WireReply(kind="response", http_status=200, body=payload))


def chunk(*parts: dict[str, Any], finish: str | None = None, usage: bool = False) -> dict:
    data = body(*parts, finish=finish)
    if not usage:
        data.pop("usageMetadata")
    return {"event": None, "data": data}


def parse_stream(events: list[dict[str, Any]], max_bytes: int = 1024 * 1024) -> ParsedReply:
    reply = WireReply(kind="stream", http_status=200, events=events)
    return ADAPTER.parse_reply(reply, max_argument_bytes=max_bytes)


def result(call_id: str, name: str, synthesized: bool = False, **data: Any) -> ToolResultMessage:
    return ToolResultMessage(
        call_id=call_id,
        name=name,
        model_result={"status": "ok", "data": data},
        is_error=False,
        synthesized=synthesized,
    )


USER = {"role": "user", "parts": [{"text": "hello"}]}


# --- requests --------------------------------------------------------------------------------


def test_conversation_starts_with_the_user_text() -> None:
    assert ADAPTER.start_conversation(user_input="hi") == [
        {"role": "user", "parts": [{"text": "hi"}]}
    ]


def test_request_declares_tools_with_a_json_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    tool = ToolDeclaration(name="get_order", description="d", parameters=schema)
    request = ADAPTER.build_request(model="gemini-3-pro-preview", conversation=[USER], tools=[tool])
    assert request == {
        "contents": [USER],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "get_order", "description": "d", "parametersJsonSchema": schema}
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
    }
    # The model is in the URL path (models/{model}:generateContent), never in the body.
    assert "model" not in request


def test_request_without_tools_has_no_tool_config() -> None:
    assert ADAPTER.build_request(model="m", conversation=[USER], tools=[]) == {"contents": [USER]}


# --- classification --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("SAFETY", Outcome.REFUSAL),
        ("BLOCKLIST", Outcome.REFUSAL),
        ("PROHIBITED_CONTENT", Outcome.REFUSAL),
        ("SPII", Outcome.REFUSAL),
        ("RECITATION", Outcome.REFUSAL),
        ("IMAGE_SAFETY", Outcome.REFUSAL),
        ("IMAGE_PROHIBITED_CONTENT", Outcome.REFUSAL),
        ("IMAGE_RECITATION", Outcome.REFUSAL),
        ("MAX_TOKENS", Outcome.TRUNCATED),
        ("CONTINUATION", Outcome.TRUNCATED),
        ("MALFORMED_FUNCTION_CALL", Outcome.MALFORMED),
        ("UNEXPECTED_TOOL_CALL", Outcome.MALFORMED),
        ("TOO_MANY_TOOL_CALLS", Outcome.MALFORMED),
        ("MISSING_THOUGHT_SIGNATURE", Outcome.MALFORMED),
        ("MALFORMED_RESPONSE", Outcome.MALFORMED),
        ("OTHER", Outcome.MALFORMED),
        ("IMAGE_OTHER", Outcome.MALFORMED),
        ("LANGUAGE", Outcome.MALFORMED),
        ("FINISH_REASON_UNSPECIFIED", Outcome.MALFORMED),
        ("SOMETHING_NEW", Outcome.MALFORMED),
        (None, Outcome.MALFORMED),
    ],
)
def test_finish_reasons_never_hand_over_calls(reason: str | None, outcome: Outcome) -> None:
    parsed = parse(
        body({"text": "partial"}, fcall("get_order", {"order_id": "ORD-1"}), finish=reason)
    )
    assert parsed.outcome is outcome
    assert parsed.raw_reason == reason
    assert parsed.calls == ()
    assert parsed.text == "partial"


def test_blocked_prompt_without_candidates_is_a_refusal() -> None:
    payload = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "safetyRatings": []},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9},
        "modelVersion": "gemini-3-pro-preview",
    }
    parsed = parse(payload)
    assert (parsed.outcome, parsed.raw_reason) == (Outcome.REFUSAL, "PROHIBITED_CONTENT")
    assert parsed.usage is not None and parsed.usage.input_tokens == 9


def test_no_candidates_and_no_block_reason_is_malformed() -> None:
    parsed = parse({"candidates": [], "responseId": "r"})
    assert (parsed.outcome, parsed.raw_reason, parsed.response_id) == (Outcome.MALFORMED, None, "r")


def test_stop_without_parts_is_malformed_not_final() -> None:
    assert parse(body()).outcome is Outcome.MALFORMED


def test_thought_parts_are_never_text() -> None:
    thought = {"text": "Let me think about refunds.", "thought": True}
    assert parse(body(thought)).outcome is Outcome.MALFORMED
    parsed = parse(body(thought, {"text": "Done."}))
    assert (parsed.outcome, parsed.text) == (Outcome.FINAL_TEXT, "Done.")


def test_function_call_without_a_name_is_malformed() -> None:
    parsed = parse(body({"functionCall": {"args": {}}}))
    assert parsed.outcome is Outcome.MALFORMED
    assert parsed.calls == ()


def test_error_envelope_inside_a_200_is_a_failure() -> None:
    parsed = parse({"error": {"code": 500, "message": "boom", "status": "INTERNAL"}})
    assert (parsed.outcome, parsed.raw_reason, parsed.retryable) == (
        Outcome.API_FAILURE,
        "INTERNAL",
        True,
    )


def test_retry_after_header_wins_over_retry_info() -> None:
    case = read_case(FIXTURES / "providers" / "gemini_generate" / "http_429_retry_info.json")
    reply = WireReply.from_case({**case, "headers": {"retry-after": "3"}})
    assert ADAPTER.parse_reply(reply).retry_after_s == 3


# --- calls and arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "arguments", "error"),
    [
        ({"order_id": "ORD-1"}, {"order_id": "ORD-1"}, False),
        (None, {}, False),  # Gemini leaves ``args`` out for a call without parameters
        ({}, {}, False),
        ({"amount_cents": "5999"}, {"amount_cents": "5999"}, False),  # no coercion
        ('{"order_id":"ORD-1"}', None, True),  # a string holding JSON is not an object
        ([1, 2], None, True),
        (7, None, True),
    ],
)
def test_args_objects_are_taken_as_is(args: Any, arguments: Any, error: bool) -> None:
    parsed = parse(body(fcall("list_open_tickets", args, call_id="c1")))
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments == arguments
    assert parsed.calls[0].arguments_error is error


def test_missing_call_ids_are_synthesized_from_the_reply() -> None:
    payload = body(
        fcall("get_order", {"order_id": "ORD-1"}, signature=SIGNATURE),
        fcall("get_order", {"order_id": "ORD-1"}),
        fcall("search_faq", {"query": "returns"}, call_id="wire-id-7"),
    )
    first, again = parse(payload), parse(copy.deepcopy(payload))
    ids = [call.call_id for call in first.calls]
    assert ids == [call.call_id for call in again.calls]  # stable across parses
    assert len(set(ids)) == 3 and all(ids)  # two identical calls still differ
    assert [call.synthesized for call in first.calls] == [True, True, False]
    assert ids[2] == "wire-id-7"
    other = parse({**payload, "responseId": "resp-2"})
    assert other.calls[0].call_id != ids[0]  # derived from the reply, not the tool name


# --- conversation ----------------------------------------------------------------------------


def test_model_turn_is_replayed_verbatim() -> None:
    case = read_case(FIXTURES / "providers" / "gemini_generate" / "three_calls_without_ids.json")
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    conversation = ADAPTER.append_reply(conversation=[USER], reply=parsed)
    assert conversation == [USER, case["body"]["candidates"][0]["content"]]
    assert conversation[1]["parts"][0]["thoughtSignature"]


def test_results_follow_call_order_with_ids_echoed_and_synthesized_ids_left_out() -> None:
    payload = body(
        fcall("get_order", {"order_id": "ORD-1"}, signature=SIGNATURE),
        fcall("get_order", {"order_id": "ORD-2"}),
        fcall("search_faq", {"query": "q"}, call_id="fc-3"),
    )
    parsed = parse(payload)
    first, second, third = parsed.calls
    conversation = ADAPTER.append_reply(conversation=[USER], reply=parsed)
    results = [
        result(third.call_id, "search_faq", n=3),
        result(second.call_id, "get_order", synthesized=True, n=2),
        ToolResultMessage(
            call_id=first.call_id,
            name="get_order",
            model_result={"status": "error", "error": {"code": "NOT_FOUND", "message": "no"}},
            is_error=True,
            synthesized=True,
        ),
    ]
    conversation = ADAPTER.append_results(conversation=conversation, results=results)
    assert conversation[-1] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "get_order",
                    "response": {
                        "status": "error",
                        "error": {"code": "NOT_FOUND", "message": "no"},
                    },
                }
            },
            {
                "functionResponse": {
                    "name": "get_order",
                    "response": {"status": "ok", "data": {"n": 2}},
                }
            },
            {
                "functionResponse": {
                    "id": "fc-3",
                    "name": "search_faq",
                    "response": {"status": "ok", "data": {"n": 3}},
                }
            },
        ],
    }
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert request_error(request=request, previous=parsed) is None


# --- request_error ---------------------------------------------------------------------------

PREVIOUS_BODY = body(
    fcall("get_order", {"order_id": "ORD-1"}, call_id="id-a", signature=SIGNATURE),
    fcall("get_order", {"order_id": "ORD-2"}, call_id="id-b"),
)
PREVIOUS = parse(PREVIOUS_BODY)
MODEL_TURN = PREVIOUS_BODY["candidates"][0]["content"]


def response_turn(*answers: tuple[str | None, str]) -> dict[str, Any]:
    parts = []
    for call_id, name in answers:
        response: dict[str, Any] = {"name": name, "response": {"status": "ok"}}
        if call_id is not None:
            response["id"] = call_id
        parts.append({"functionResponse": response})
    return {"role": "user", "parts": parts}


def error_text(contents: list[dict[str, Any]], previous: ParsedReply = PREVIOUS) -> str | None:
    problem = request_error(request={"contents": contents}, previous=previous)
    if problem is None:
        return None
    assert problem.kind == "http_error" and problem.http_status == 400
    error = problem.body["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    parsed = ADAPTER.parse_reply(problem)
    assert (parsed.outcome, parsed.raw_reason, parsed.retryable) == (
        Outcome.API_FAILURE,
        "INVALID_ARGUMENT",
        False,
    )
    return str(error["message"])


def test_every_call_answered_once_is_accepted() -> None:
    ok = [USER, MODEL_TURN, response_turn(("id-b", "get_order"), ("id-a", "get_order"))]
    assert error_text(ok) is None
    # Answering by name and order (no ids) is accepted too.
    assert (
        error_text([USER, MODEL_TURN, response_turn((None, "get_order"), (None, "get_order"))])
        is None
    )


def test_unanswered_or_extra_responses_break_the_count() -> None:
    assert error_text([USER, MODEL_TURN, response_turn(("id-a", "get_order"))]) == COUNT_MISMATCH
    three = response_turn(("id-a", "get_order"), ("id-b", "get_order"), ("id-c", "get_order"))
    assert error_text([USER, MODEL_TURN, three]) == COUNT_MISMATCH
    assert error_text([USER, MODEL_TURN]) == COUNT_MISMATCH  # no response turn at all
    assert error_text([USER]) == COUNT_MISMATCH  # the reply was never replayed


def test_duplicate_and_unknown_ids_are_rejected() -> None:
    twice = response_turn(("id-a", "get_order"), ("id-a", "get_order"))
    assert error_text([USER, MODEL_TURN, twice]) == (
        "Please ensure that each function call is answered by exactly one function response; "
        "function call id-a has 2."
    )
    unknown = response_turn(("id-a", "get_order"), ("id-z", "get_order"))
    assert error_text([USER, MODEL_TURN, unknown]) == (
        "Please ensure that each function response id matches the id of a function call in the "
        "function call turn; no function call has id id-z."
    )


def test_a_synthesized_id_may_not_be_sent_as_if_issued() -> None:
    reply = body(fcall("get_order", {"order_id": "ORD-1"}, signature=SIGNATURE))
    previous = parse(reply)
    made_up = previous.calls[0].call_id
    turn = reply["candidates"][0]["content"]
    assert error_text([USER, turn, response_turn((None, "get_order"))], previous) is None
    assert "no function call has id " + made_up in str(
        error_text([USER, turn, response_turn((made_up, "get_order"))], previous)
    )
    wrong_name = error_text([USER, turn, response_turn((None, "search_faq"))], previous)
    assert wrong_name == (
        "Please ensure that function responses without an id follow the order of the function "
        "calls; function response 1 is named 'search_faq' but answers function call 'get_order'."
    )


def test_thought_signature_must_come_back_on_the_model_turn() -> None:
    stripped = copy.deepcopy(MODEL_TURN)
    del stripped["parts"][0]["thoughtSignature"]
    answers = response_turn(("id-a", "get_order"), ("id-b", "get_order"))
    expected = (
        "Function call is missing a thought_signature in functionCall parts. This is required "
        "for tools to work correctly, and missing thought_signature may lead to degraded model "
        "performance. Additional data, function call `default_api:get_order` , position 2. "
        "Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more "
        "details."
    )
    assert error_text([USER, stripped, answers]) == expected
    altered = copy.deepcopy(MODEL_TURN)
    altered["parts"][0]["thoughtSignature"] = "Cq" + "A" * 40
    assert error_text([USER, altered, answers]) == expected


def test_turn_order_rules() -> None:
    answers = response_turn(("id-a", "get_order"), ("id-b", "get_order"))
    assert error_text([USER, answers]) == RESPONSE_NOT_AFTER_CALL
    assert error_text([MODEL_TURN, answers]) == CALL_NOT_AFTER_USER
    assert error_text([USER, MODEL_TURN, MODEL_TURN, answers]) == CALL_NOT_AFTER_USER


def test_nothing_to_check_after_a_reply_without_calls() -> None:
    final = parse(body({"text": "All done."}))
    assert error_text([USER, final.assistant_items[0], USER], final) is None


# --- streams ---------------------------------------------------------------------------------


def test_calls_are_collected_across_chunks_in_order_with_progress_notes() -> None:
    assembler = ADAPTER.stream_assembler(max_argument_bytes=1024)
    notes = [
        assembler.feed(chunk({"text": "Looking up both orders. "})),
        assembler.feed(chunk(fcall("get_order", {"order_id": "ORD-1"}, signature=SIGNATURE))),
        assembler.feed(
            chunk(fcall("get_order", {"order_id": "ORD-2"}), fcall("search_faq", {"query": "q"}))
        ),
        assembler.feed(chunk({"text": ""}, finish="STOP", usage=True)),
    ]
    assert notes == [None, "get_order", "get_order", None]
    parsed = assembler.finish()
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert [c.arguments for c in parsed.calls] == [
        {"order_id": "ORD-1"},
        {"order_id": "ORD-2"},
        {"query": "q"},
    ]
    assert all(call.synthesized for call in parsed.calls)
    assert len({call.call_id for call in parsed.calls}) == 3
    assert parsed.text == "Looking up both orders. "
    assert parsed.continuation == {"thought_signature"}
    # Every part comes back verbatim, in order, in one model turn.
    assert [list(p) for p in parsed.assistant_items[0]["parts"]] == [
        ["text"],
        ["functionCall", "thoughtSignature"],
        ["functionCall"],
        ["functionCall"],
        ["text"],
    ]


def test_stream_ids_are_stable() -> None:
    events = [chunk(fcall("get_order", {"order_id": "ORD-1"}), finish="STOP", usage=True)]
    assert (
        parse_stream(events).calls[0].call_id
        == parse_stream(copy.deepcopy(events)).calls[0].call_id
    )


def test_cut_stream_is_truncated_even_with_a_complete_call() -> None:
    events = [
        chunk({"text": "Checking."}, usage=True),
        chunk(fcall("get_order", {"order_id": "ORD-1"}, call_id="c1", signature=SIGNATURE)),
    ]
    parsed = parse_stream(events)
    assert (parsed.outcome, parsed.raw_reason, parsed.calls) == (Outcome.TRUNCATED, None, ())
    assert parsed.text == "Checking."
    assert parsed.continuation == {"thought_signature"}
    assert parsed.usage is not None and parsed.usage.input_tokens == 100
    assert parse_stream([]).outcome is Outcome.TRUNCATED


def test_stream_cut_by_max_tokens_hands_over_nothing() -> None:
    events = [chunk(fcall("get_order", {"order_id": "ORD-1"}), finish="MAX_TOKENS", usage=True)]
    parsed = parse_stream(events)
    assert (parsed.outcome, parsed.raw_reason, parsed.calls) == (
        Outcome.TRUNCATED,
        "MAX_TOKENS",
        (),
    )


def test_oversized_arguments_give_that_call_an_argument_error() -> None:
    big = {"query": "x" * 200}
    events = [
        chunk(
            fcall("search_faq", big, call_id="big"),
            fcall("get_order", {"order_id": "ORD-1"}, call_id="small"),
        ),
        chunk(finish="STOP", usage=True),
    ]
    parsed = parse_stream(events, max_bytes=64)
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    big_call, small_call = parsed.calls
    assert (big_call.arguments, big_call.arguments_error, big_call.raw_arguments) == (
        None,
        True,
        OVERFLOW_MARKER,
    )
    assert (small_call.arguments, small_call.arguments_error) == ({"order_id": "ORD-1"}, False)


@pytest.mark.parametrize(
    ("status", "retryable"), [("UNAVAILABLE", True), ("INVALID_ARGUMENT", False)]
)
def test_error_chunk_fails_the_stream(status: str, retryable: bool) -> None:
    events = [
        chunk({"text": "Partial answer"}, usage=True),
        {"event": None, "data": {"error": {"code": 503, "message": "busy", "status": status}}},
    ]
    parsed = parse_stream(events)
    assert (parsed.outcome, parsed.raw_reason, parsed.retryable) == (
        Outcome.API_FAILURE,
        status,
        retryable,
    )
    assert parsed.text is None and parsed.calls == ()


def test_blocked_prompt_completes_a_stream_as_refusal() -> None:
    events = [
        {
            "event": None,
            "data": {
                "promptFeedback": {"blockReason": "SAFETY"},
                "usageMetadata": {"promptTokenCount": 9},
                "responseId": "r-blocked",
            },
        }
    ]
    parsed = parse_stream(events)
    assert (parsed.outcome, parsed.raw_reason, parsed.response_id) == (
        Outcome.REFUSAL,
        "SAFETY",
        "r-blocked",
    )


def test_stream_usage_comes_from_the_last_chunk_carrying_it() -> None:
    last = chunk({"text": "Done."}, finish="STOP", usage=True)
    last["data"]["usageMetadata"] = {
        "promptTokenCount": 300,
        "candidatesTokenCount": 12,
        "thoughtsTokenCount": 30,
    }
    parsed = parse_stream([chunk({"text": "All "}, usage=True), last])
    assert parsed.outcome is Outcome.FINAL_TEXT and parsed.text == "All Done."
    assert parsed.usage is not None
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (300, 42)


def test_stream_events_that_are_not_a_list_read_as_a_cut_stream() -> None:
    reply = WireReply(kind="stream", http_status=200, events=True)  # type: ignore[arg-type]
    assert ADAPTER.parse_reply(reply).outcome is Outcome.TRUNCATED


# --- bundled scenarios -----------------------------------------------------------------------

SCENARIOS = REPO / "toolcalls" / "demo" / "scenarios" / "gemini_generate"
REFUND_CALLS = [
    ("get_order", {"order_id": "ORD-1001"}),
    (
        "create_refund_draft",
        {"order_id": "ORD-1001", "amount_cents": 4999, "reason": "damaged_item"},
    ),
    ("submit_refund", {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 4999}),
]


@pytest.mark.parametrize(
    ("name", "outcomes", "calls"),
    [
        ("refund_approve", ["TOOL_PROPOSALS"] * 3 + ["FINAL_TEXT"], REFUND_CALLS),
        ("refund_deny", ["TOOL_PROPOSALS"] * 3 + ["FINAL_TEXT"], REFUND_CALLS),
        ("refund_approve_stream", ["TOOL_PROPOSALS"] * 3 + ["FINAL_TEXT"], REFUND_CALLS),
        ("max_tokens", ["TOOL_PROPOSALS", "TRUNCATED"], REFUND_CALLS[:1]),
        (
            "unknown_tool",
            ["TOOL_PROPOSALS", "FINAL_TEXT"],
            [("issue_store_credit", {"order_id": "ORD-1001", "amount_cents": 4999})],
        ),
        ("refusal", ["REFUSAL"], []),
    ],
)
def test_bundled_scenario_replays_with_synthesized_ids(
    name: str, outcomes: list[str], calls: list[tuple[str, dict[str, Any]]]
) -> None:
    scenario = read_case(SCENARIOS / f"{name}.json")
    assert scenario["family"] == "gemini_generate"
    conversation = ADAPTER.start_conversation(user_input=scenario["input"])
    seen: list[str] = []
    proposed: list[tuple[str, dict[str, Any] | None]] = []
    previous: ParsedReply | None = None
    for reply in scripted(scenario["replies"]):
        request = ADAPTER.build_request(
            model=scenario["model"], conversation=conversation, tools=[]
        )
        if previous is not None:
            assert request_error(request=request, previous=previous) is None
        parsed = previous = ADAPTER.parse_reply(WireReply.from_case(reply))
        seen.append(parsed.outcome.value)
        if parsed.outcome is not Outcome.TOOL_PROPOSALS:
            continue
        assert parsed.continuation == {"thought_signature"}
        assert all(call.synthesized for call in parsed.calls)
        proposed += [(call.name, call.arguments) for call in parsed.calls]
        conversation = ADAPTER.append_reply(conversation=conversation, reply=parsed)
        results = [
            result(call.call_id, call.name, synthesized=call.synthesized) for call in parsed.calls
        ]
        conversation = ADAPTER.append_results(conversation=conversation, results=results)
    assert seen == outcomes
    assert proposed == calls


def test_a_malformed_function_call_is_marked_so_the_engine_may_ask_again() -> None:
    """MALFORMED_FUNCTION_CALL (the model wrote a call it could not form) and a functionCall
    part without a name are malformed calls; the other unusable endings are not."""
    assert parse(body(finish="MALFORMED_FUNCTION_CALL")).malformed_call is True
    assert parse(body(fcall(""), finish="STOP")).malformed_call is True
    for reason in ("UNEXPECTED_TOOL_CALL", "MALFORMED_RESPONSE", "OTHER", "SOMETHING_NEW"):
        parsed = parse(body({"text": "partial"}, finish=reason))
        assert (parsed.outcome, parsed.malformed_call) == (Outcome.MALFORMED, False), reason
    assert parse(body(finish="STOP")).malformed_call is False
    assert parse(body({"text": "Hi."})).malformed_call is False
