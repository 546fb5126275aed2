"""Gemini Interactions adapter: fixture conformance, request building, result shaping, pairing,
stream assembly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from providers.base import Outcome, ParsedReply, ToolDeclaration, ToolResultMessage, WireReply
from providers.gemini_interactions import GeminiInteractionsAdapter
from providers.gemini_interactions.rules import (
    COUNT_MISMATCH,
    INVALID_ARGUMENT,
    INVALID_INPUT,
    RESPONSE_NOT_AFTER_CALL,
    request_error,
    unknown_call_message,
)
from providers.replay import ReplayTransport
from providers.streaming import OVERFLOW_MARKER
from tests.conftest import FIXTURES
from tests.providers.conformance import check, load_cases, read_case

ADAPTER = GeminiInteractionsAdapter()
CASES = load_cases(FIXTURES, "gemini_interactions")
SCENARIOS = sorted(
    (Path(__file__).resolve().parents[2] / "toolcalls/demo/scenarios/gemini_interactions").glob(
        "*.json"
    )
)
SIGNATURE = "CqYBAVSoXO5cR2m3Yx8LqzP0tF4nW9aKc1bJd7eUf6gHi2jLk3mNo4pQr5sTu6vWx7yZ"


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fixture_case(path: Path) -> None:
    case = read_case(path)
    reply = WireReply.from_case(case)
    check(ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply), case["expect"])


# --- builders ---------------------------------------------------------------------------------


def thought(signature: str = SIGNATURE) -> dict[str, Any]:
    return {"type": "thought", "signature": signature}


def call(call_id: str | None, name: str, arguments: Any = None) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "function_call", "name": name}
    if call_id is not None:
        step["id"] = call_id
    step["arguments"] = {} if arguments is None else arguments
    return step


def output(text: str) -> dict[str, Any]:
    return {"type": "model_output", "content": [{"type": "text", "text": text}]}


def interaction(*steps: dict[str, Any], status: str = "requires_action", **extra: Any) -> WireReply:
    body = {
        "id": "v1_ChdTestInteraction0001",
        "object": "interaction",
        "model": "gemini-3-pro-preview",
        "status": status,
        "steps": list(steps),
        "usage": {"total_input_tokens": 100, "total_output_tokens": 20},
        **extra,
    }
    return WireReply(kind="response", http_status=200, body=body)


def parse(*steps: dict[str, Any], status: str = "requires_action", **extra: Any) -> ParsedReply:
    return ADAPTER.parse_reply(interaction(*steps, status=status, **extra))


def event(event_type: str, **data: Any) -> dict[str, Any]:
    return {"event": event_type, "data": {"event_type": event_type, **data}}


def created() -> dict[str, Any]:
    return event(
        "interaction.created",
        interaction={"id": "v1_ChdStream0001", "status": "in_progress", "object": "interaction"},
    )


def completed(status: str = "requires_action") -> dict[str, Any]:
    usage = {"total_input_tokens": 50, "total_output_tokens": 10, "total_thought_tokens": 5}
    return event(
        "interaction.completed",
        interaction={"id": "v1_ChdStream0001", "status": status, "usage": usage},
    )


def call_start(index: int, call_id: str, name: str, arguments: Any = None) -> dict[str, Any]:
    step: dict[str, Any] = {"type": "function_call", "id": call_id, "name": name}
    if arguments is not None:
        step["arguments"] = arguments
    return event("step.start", index=index, step=step)


def signature_delta(index: int, signature: str = SIGNATURE) -> dict[str, Any]:
    return event(
        "step.delta", index=index, delta={"type": "thought_signature", "signature": signature}
    )


def args_delta(index: int, fragment: str) -> dict[str, Any]:
    return event(
        "step.delta", index=index, delta={"type": "arguments_delta", "arguments": fragment}
    )


def stream(*events: dict[str, Any]) -> WireReply:
    return WireReply(kind="stream", http_status=200, events=list(events))


def result(call_id: str, name: str, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(
        call_id=call_id, name=name, model_result={"status": "ok"}, is_error=is_error
    )


# --- request building and conversation shape -------------------------------------------------


def test_request_is_stateless_with_flat_tools() -> None:
    tool = ToolDeclaration(name="get_order", description="d", parameters={"type": "object"})
    conversation = ADAPTER.start_conversation(user_input="hello")
    body = ADAPTER.build_request(
        model="gemini-3-pro-preview", conversation=conversation, tools=[tool]
    )
    assert body == {
        "model": "gemini-3-pro-preview",
        "input": [{"type": "user_input", "content": [{"type": "text", "text": "hello"}]}],
        "tools": [
            {
                "type": "function",
                "name": "get_order",
                "description": "d",
                "parameters": {"type": "object"},
            }
        ],
        "store": False,
    }
    assert "previous_interaction_id" not in body


def test_results_follow_the_replayed_steps_with_matching_call_ids() -> None:
    case = read_case(
        FIXTURES / "providers" / "gemini_interactions" / "three_calls_after_thought.json"
    )
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    start = ADAPTER.start_conversation(user_input="x")
    conversation = ADAPTER.append_reply(conversation=start, reply=parsed)
    # The thought step (with its signature) and all three calls come back verbatim, in order.
    assert conversation[1:] == case["body"]["steps"]
    results = [
        ToolResultMessage(
            call_id=c.call_id,
            name=c.name,
            model_result={"status": "ok", "data": {"n": i}},
            is_error=i == 1,
        )
        for i, c in enumerate(reversed(parsed.calls))
    ]
    conversation = ADAPTER.append_results(conversation=conversation, results=results)
    # Results follow in the order given (here reversed), each naming its call; errors marked.
    assert conversation[5:] == [
        {
            "type": "function_result",
            "name": call["name"],
            "call_id": call["call_id"],
            "result": {"status": "ok", "data": {"n": n}},
            **({"is_error": True} if n == 1 else {}),
        }
        for n, call in enumerate(reversed(case["expect"]["calls"]))
    ]
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert request_error(request=request, previous=parsed) is None
    json.dumps(request)  # the stored conversation is plain JSON


def test_echoed_input_steps_are_not_assistant_items() -> None:
    echoed = {"type": "user_input", "content": [{"type": "text", "text": "hi"}]}
    parsed = parse(echoed, thought(), call("a1", "get_order"))
    assert [s["type"] for s in parsed.assistant_items] == ["thought", "function_call"]


# --- request_error ----------------------------------------------------------------------------

PREVIOUS_STEPS = [thought(), output("Checking."), call("a1", "get_order"), call("b2", "get_order")]


def _previous() -> ParsedReply:
    return parse(*PREVIOUS_STEPS)


def _problem(steps: list[dict[str, Any]]) -> str | None:
    user = ADAPTER.start_conversation(user_input="x")
    reply = request_error(request={"input": [*user, *steps]}, previous=_previous())
    if reply is None:
        return None
    assert reply.kind == "http_error"
    assert reply.http_status == 400
    assert reply.body["error"]["code"] == 400
    assert reply.body["error"]["status"] == "INVALID_ARGUMENT"
    failure = ADAPTER.parse_reply(reply)
    assert failure.outcome is Outcome.API_FAILURE
    assert failure.raw_reason == "INVALID_ARGUMENT"
    assert failure.retryable is False
    return str(reply.body["error"]["message"])


def fr(call_id: str | None, name: str = "get_order") -> dict[str, Any]:
    step: dict[str, Any] = {"type": "function_result", "name": name, "result": {"status": "ok"}}
    if call_id is not None:
        step["call_id"] = call_id
    return step


def test_request_error_accepts_every_call_answered_once() -> None:
    assert _problem([*PREVIOUS_STEPS, fr("a1"), fr("b2")]) is None
    assert _problem([*PREVIOUS_STEPS, fr("b2"), fr("a1")]) is None  # any order


def test_request_error_unanswered_and_duplicate_calls() -> None:
    assert _problem([*PREVIOUS_STEPS, fr("a1")]) == COUNT_MISMATCH
    assert _problem([*PREVIOUS_STEPS]) == COUNT_MISMATCH
    assert _problem([*PREVIOUS_STEPS, fr("a1"), fr("b2"), fr("b2")]) == COUNT_MISMATCH
    assert _problem([*PREVIOUS_STEPS, fr("a1"), fr("a1")]) == COUNT_MISMATCH


def test_request_error_result_for_an_unknown_call() -> None:
    # input[0] is the user_input step, so the extra result sits at input[7].
    assert _problem([*PREVIOUS_STEPS, fr("a1"), fr("b2"), fr("zz9")]) == unknown_call_message(
        7, "zz9"
    )
    assert unknown_call_message(2, "q8w1zz0p") == (
        "input[2].call_id 'q8w1zz0p' does not match any function_call step of the previous "
        "interaction."
    )
    # Matched by ID and name: the right ID under another name is not an answer.
    assert _problem([*PREVIOUS_STEPS, fr("a1"), fr("b2", "search_faq")]) == (
        unknown_call_message(6, "b2")
    )
    # The calls themselves were not sent back: their results answer nothing.
    assert _problem([fr("a1"), fr("b2")]) == unknown_call_message(1, "a1")


def test_request_error_misplaced_results() -> None:
    steps = [thought(), output("Checking."), call("a1", "get_order"), fr("a1")]
    steps += [call("b2", "get_order"), fr("b2")]
    assert _problem(steps) == RESPONSE_NOT_AFTER_CALL
    user = {"type": "user_input", "content": [{"type": "text", "text": "and?"}]}
    assert _problem([*PREVIOUS_STEPS, user, fr("a1"), fr("b2")]) == RESPONSE_NOT_AFTER_CALL
    assert _problem([fr("a1"), *PREVIOUS_STEPS, fr("b2")]) == RESPONSE_NOT_AFTER_CALL


def test_request_error_thought_signature_must_come_back_unchanged_and_first() -> None:
    calls = PREVIOUS_STEPS[1:]
    answers = [fr("a1"), fr("b2")]
    assert _problem([*calls, *answers]) == INVALID_ARGUMENT  # dropped
    assert _problem([thought("CqYBforged"), *calls, *answers]) == INVALID_ARGUMENT  # altered
    assert _problem([{"type": "thought"}, *calls, *answers]) == INVALID_ARGUMENT  # stripped
    moved = [PREVIOUS_STEPS[1], PREVIOUS_STEPS[2], thought(), PREVIOUS_STEPS[3], *answers]
    assert _problem(moved) == INVALID_ARGUMENT  # after a call it preceded


def test_request_error_result_without_name_is_invalid_input() -> None:
    nameless = {"type": "function_result", "call_id": "b2", "result": {"status": "ok"}}
    assert _problem([*PREVIOUS_STEPS, fr("a1"), nameless]) == INVALID_INPUT


def test_request_error_ignores_earlier_turns_that_were_answered() -> None:
    earlier = [thought("CqYBearlier"), call("e0", "get_order"), fr("e0")]
    assert _problem([*earlier, *PREVIOUS_STEPS, fr("a1"), fr("b2")]) is None


def test_synthesized_ids_are_stable_unique_and_never_sent() -> None:
    reply = interaction(thought(), call(None, "get_order"), call(None, "get_order"))
    first, again = ADAPTER.parse_reply(reply), ADAPTER.parse_reply(reply)
    assert first.outcome is Outcome.TOOL_PROPOSALS
    ids = [c.call_id for c in first.calls]
    assert ids == [c.call_id for c in again.calls]
    assert len(set(ids)) == 2 and all(ids) and all(c.synthesized for c in first.calls)
    other = ADAPTER.parse_reply(interaction(thought(), call(None, "get_order", {"x": 1})))
    assert other.calls[0].call_id not in ids
    conversation = ADAPTER.append_reply(conversation=[], reply=first)
    results = [
        ToolResultMessage(
            call_id=c.call_id, name=c.name, model_result={}, is_error=False, synthesized=True
        )
        for c in first.calls
    ]
    conversation = ADAPTER.append_results(conversation=conversation, results=results)
    assert all("call_id" not in step for step in conversation[3:])
    assert all("id" not in step for step in conversation if step["type"] == "function_call")
    assert request_error(request={"input": conversation}, previous=first) is None
    short = {"input": conversation[:-1]}
    problem = request_error(request=short, previous=first)
    assert problem is not None and problem.body["error"]["message"] == COUNT_MISMATCH


# --- classification of whole interactions -----------------------------------------------------


@pytest.mark.parametrize(
    ("code", "retryable"),
    [
        ("UNAVAILABLE", True),
        ("INTERNAL", True),
        (503, True),
        (14, True),
        ("INVALID_ARGUMENT", False),
    ],
)
def test_failed_interaction_is_an_api_failure(code: Any, retryable: bool) -> None:
    parsed = parse(
        output("partial"), status="failed", errors=[{"code": code, "message": "backend failed"}]
    )
    assert parsed.outcome is Outcome.API_FAILURE
    assert parsed.raw_reason == "failed"
    assert parsed.retryable is retryable
    assert parsed.text is None and parsed.calls == ()
    assert parsed.error_message == "backend failed"


@pytest.mark.parametrize("status", ["incomplete", "budget_exceeded", "requires_continuation"])
def test_cut_interactions_hand_over_no_call(status: str) -> None:
    parsed = parse(thought(), call("a1", "get_order", {"order_id": "ORD-1"}), status=status)
    assert parsed.outcome is Outcome.TRUNCATED
    assert parsed.raw_reason == status
    assert parsed.calls == ()
    assert parsed.continuation == frozenset({"thought_signature"})


def test_safety_block_wins_over_calls() -> None:
    blocked = {
        "type": "model_output",
        "content": [{"type": "text", "text": "Sure, here"}],
        "error": {
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RECITATION"}
            ]
        },
    }
    parsed = parse(blocked, call("a1", "get_order"))
    assert parsed.outcome is Outcome.REFUSAL
    assert parsed.raw_reason == "RECITATION"
    assert parsed.text == "Sure, here"
    assert parsed.calls == ()


def test_non_safety_output_error_is_malformed() -> None:
    failed = {
        "type": "model_output",
        "error": {
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "MALFORMED_RESPONSE",
                }
            ]
        },
    }
    parsed = parse(failed, status="completed")
    assert parsed.outcome is Outcome.MALFORMED
    assert parsed.raw_reason == "MALFORMED_RESPONSE"


@pytest.mark.parametrize(
    ("steps", "status"),
    [
        ([], "completed"),  # nothing at all
        ([output("Hello")], "requires_action"),  # claims pending calls, has none
        ([output("Hello")], "in_progress"),  # not finished
        ([output("Hello")], "cancelled"),
        ([output("Hello")], None),
        ([thought()], "completed"),  # a thought is never text
        ([{"type": "function_call", "id": "a1", "arguments": {}}], "requires_action"),  # no name
    ],
)
def test_unusable_interactions_are_malformed(steps: list[dict[str, Any]], status: Any) -> None:
    parsed = parse(*steps, status=status)
    assert parsed.outcome is Outcome.MALFORMED
    assert parsed.calls == ()


def test_completed_with_a_call_is_still_proposals() -> None:
    parsed = parse(output("One moment."), call("a1", "get_order"), status="completed")
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.text == "One moment."


@pytest.mark.parametrize(
    ("arguments", "expected", "error"),
    [
        ({"amount_cents": "5999"}, {"amount_cents": "5999"}, False),  # no coercion
        ({}, {}, False),
        (None, {}, False),
        ([1, 2], None, True),
        ("not json", None, True),
        ('{"a":1}{"b":2}', None, True),
    ],
)
def test_call_arguments_are_read_strictly(arguments: Any, expected: Any, error: bool) -> None:
    step = {"type": "function_call", "id": "a1", "name": "get_order", "arguments": arguments}
    parsed = parse(step)
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.calls[0].arguments == expected
    assert parsed.calls[0].arguments_error is error


def test_cut_off_argument_text_truncates_even_when_requires_action() -> None:
    step = {"type": "function_call", "id": "a1", "name": "get_order", "arguments": '{"order_id":"O'}
    parsed = parse(step)
    assert parsed.outcome is Outcome.TRUNCATED
    assert parsed.calls == ()


def test_http_error_keeps_google_status_and_retry_delay() -> None:
    reply = WireReply(
        kind="http_error",
        http_status=500,
        body={"error": {"code": 500, "message": "Internal error.", "status": "INTERNAL"}},
    )
    parsed = ADAPTER.parse_reply(reply)
    assert (parsed.outcome, parsed.raw_reason, parsed.retryable) == (
        Outcome.API_FAILURE,
        "INTERNAL",
        True,
    )
    assert parsed.retry_after_s is None


# --- streams ----------------------------------------------------------------------------------


def test_progress_notes_name_the_tool_when_its_step_starts() -> None:
    assembler = ADAPTER.stream_assembler(max_argument_bytes=1024)
    assert assembler.feed(created()) is None
    assert assembler.feed(event("step.start", index=0, step={"type": "thought"})) is None
    started = event(
        "step.start", index=1, step={"type": "function_call", "id": "a1", "name": "get_order"}
    )
    assert assembler.feed(started) == "get_order"
    assert assembler.feed(args_delta(1, "{}")) is None


def test_interleaved_argument_deltas_are_keyed_by_index() -> None:
    parsed = ADAPTER.parse_reply(
        stream(
            created(),
            event("step.start", index=0, step={"type": "thought", "signature": SIGNATURE}),
            event("step.stop", index=0),
            call_start(1, "a1", "get_order", {}),
            call_start(2, "b2", "search_faq", {}),
            args_delta(1, '{"order_'),
            args_delta(2, '{"query":"ret'),
            args_delta(1, 'id":"ORD-1"}'),
            args_delta(2, 'urns"}'),
            event("step.stop", index=2),
            event("step.stop", index=1),
            completed(),
        )
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    assert parsed.response_id == "v1_ChdStream0001"
    assert [(c.call_id, c.name, c.arguments) for c in parsed.calls] == [
        ("a1", "get_order", {"order_id": "ORD-1"}),
        ("b2", "search_faq", {"query": "returns"}),
    ]
    assert parsed.usage is not None and parsed.usage.output_tokens == 15
    # The replayed steps carry objects, not argument strings.
    assert parsed.assistant_items[1]["arguments"] == {"order_id": "ORD-1"}


def test_index_reuse_starts_a_new_step_and_start_arguments_are_the_fallback() -> None:
    parsed = ADAPTER.parse_reply(
        stream(
            created(),
            call_start(0, "a1", "get_order", {"order_id": "ORD-1"}),
            event("step.stop", index=0),
            call_start(0, "b2", "list_open_tickets", {}),
            event("step.stop", index=0),
            completed(),
        )
    )
    assert [(c.call_id, c.arguments) for c in parsed.calls] == [
        ("a1", {"order_id": "ORD-1"}),
        ("b2", {}),
    ]


def test_argument_overflow_marks_only_that_call() -> None:
    parsed = ADAPTER.parse_reply(
        stream(
            created(),
            call_start(0, "a1", "search_faq"),
            args_delta(0, '{"query":"' + "x" * 40),
            args_delta(0, '"}'),
            call_start(1, "b2", "get_order"),
            args_delta(1, '{"order_id":"ORD-1"}'),
            completed(),
        ),
        max_argument_bytes=32,
    )
    assert parsed.outcome is Outcome.TOOL_PROPOSALS
    first, second = parsed.calls
    assert (first.arguments, first.arguments_error, first.raw_arguments) == (
        None,
        True,
        OVERFLOW_MARKER,
    )
    assert (second.arguments, second.arguments_error) == ({"order_id": "ORD-1"}, False)


def test_cut_stream_is_truncated_whatever_it_held() -> None:
    events = [
        created(),
        event("step.start", index=0, step={"type": "thought"}),
        signature_delta(0),
        call_start(1, "a1", "get_order"),
        args_delta(1, '{"order_id":"ORD-1"}'),
        event("step.stop", index=1),
    ]
    parsed = ADAPTER.parse_reply(stream(*events))
    assert parsed.outcome is Outcome.TRUNCATED
    assert parsed.raw_reason is None
    assert parsed.calls == ()
    assert parsed.continuation == frozenset({"thought_signature"})
    reported = event("interaction.status_update", interaction_id="v1_x", status="requires_action")
    parsed = ADAPTER.parse_reply(stream(*events, reported))
    assert (parsed.outcome, parsed.raw_reason) == (Outcome.TRUNCATED, "requires_action")


def test_error_event_is_an_api_failure_and_discards_text() -> None:
    parsed = ADAPTER.parse_reply(
        stream(
            created(),
            event("step.start", index=0, step={"type": "model_output"}),
            event("step.delta", index=0, delta={"type": "text", "text": "Let me"}),
            event("error", error={"code": "UNAVAILABLE", "message": "The model is overloaded."}),
        )
    )
    assert parsed.outcome is Outcome.API_FAILURE
    assert (parsed.raw_reason, parsed.retryable, parsed.text) == ("UNAVAILABLE", True, None)
    assert parsed.error_message == "The model is overloaded."


def test_streamed_text_and_signature_deltas_become_replayable_steps() -> None:
    parsed = ADAPTER.parse_reply(
        stream(
            created(),
            event("step.start", index=0, step={"type": "thought"}),
            signature_delta(0),
            event(
                "step.delta", index=0, delta={"type": "thought_summary", "content": {"text": "x"}}
            ),
            event("step.stop", index=0),
            event("step.start", index=1, step={"type": "model_output"}),
            event("step.delta", index=1, delta={"type": "text", "text": "Your order "}),
            event("step.delta", index=1, delta={"type": "text", "text": "has shipped."}),
            event("step.stop", index=1),
            completed("completed"),
        )
    )
    assert parsed.outcome is Outcome.FINAL_TEXT
    assert parsed.text == "Your order has shipped."
    assert parsed.assistant_items == (
        {"type": "thought", "signature": SIGNATURE},
        {"type": "model_output", "content": [{"type": "text", "text": "Your order has shipped."}]},
    )
    assert parsed.continuation == frozenset({"thought_signature"})


def test_streamed_reply_round_trips_through_request_error() -> None:
    case = read_case(
        FIXTURES / "providers" / "gemini_interactions" / "stream_signed_thought_then_call.json"
    )
    parsed = ADAPTER.parse_reply(WireReply.from_case(case))
    conversation = ADAPTER.append_reply(
        conversation=ADAPTER.start_conversation(user_input="x"), reply=parsed
    )
    conversation = ADAPTER.append_results(
        conversation=conversation,
        results=[result(call.call_id, call.name) for call in parsed.calls],
    )
    request = ADAPTER.build_request(model="m", conversation=conversation, tools=[])
    assert request_error(request=request, previous=parsed) is None
    assert conversation[1]["signature"] == case["events"][1]["data"]["step"]["signature"]
    assert conversation[2]["arguments"] == case["expect"]["calls"][0]["arguments"]


# --- bundled scenarios ------------------------------------------------------------------------


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_bundled_scenario_replays_without_a_pairing_error(path: Path) -> None:
    scenario = json.loads(path.read_text(encoding="utf-8"))
    transport = ReplayTransport(adapter=ADAPTER, replies=scenario["replies"])
    conversation = ADAPTER.start_conversation(user_input=scenario["input"])
    outcomes = []
    for turn in range(len(scenario["replies"])):
        request = ADAPTER.build_request(
            model=scenario["model"], conversation=conversation, tools=[]
        )
        parsed = ADAPTER.parse_reply(transport.send(request=request, turn=turn))
        outcomes.append(parsed.outcome)
        assert parsed.outcome is not Outcome.API_FAILURE, parsed.error_message
        if parsed.outcome is not Outcome.TOOL_PROPOSALS:
            break
        assert parsed.continuation == frozenset({"thought_signature"})
        conversation = ADAPTER.append_reply(conversation=conversation, reply=parsed)
        results = [result(c.call_id, c.name) for c in parsed.calls]
        conversation = ADAPTER.append_results(conversation=conversation, results=results)
    assert len(outcomes) == len(scenario["replies"])
    assert outcomes[-1] in (Outcome.FINAL_TEXT, Outcome.TRUNCATED, Outcome.REFUSAL)
