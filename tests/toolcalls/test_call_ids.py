"""Call IDs that recur across turns: every call stays uniquely addressable, every request sent
back answers each call exactly once, and the operation completes with the model told."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest

from providers.families import ADAPTERS
from tests.engine import bundled_replies, start_family
from tests.replies import scripted
from tests.toolcalls.test_history_hygiene import CALL_IN_REPLY
from toolcalls.demo.models import LedgerEntry
from toolcalls.models import Operation
from toolcalls.states import CallState, OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

ORDER = {"order_id": "ORD-1001"}
DRAFT = {"order_id": "ORD-1001", "amount_cents": 2000, "reason": "damaged_item"}
SUBMIT = {"order_id": "ORD-1001", "draft_id": "RD-ORD-1001-1", "amount_cents": 2000}
STEPS = [("get_order", ORDER), ("create_refund_draft", DRAFT), ("submit_refund", SUBMIT)]


def chat_reply(response_id: str | None, call_id: str | None, name: str, args: Any) -> dict:
    raw = args if isinstance(args, str) else json.dumps(args)
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": raw}}
    if call_id is not None:
        call["id"] = call_id
    body: dict[str, Any] = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    if response_id is not None:
        body["id"] = response_id
    return {"kind": "response", "http_status": 200, "body": body}


def chat_final(text: str = "Your refund was submitted.") -> dict:
    message = {"role": "assistant", "content": text}
    body = {"id": "chatcmpl-final", "choices": [{"message": message, "finish_reason": "stop"}]}
    return {"kind": "response", "http_status": 200, "body": body}


def gemini_reply(call_id: str | None, name: str, args: Any, response_id: str | None) -> dict:
    call: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        call["id"] = call_id
    body: dict[str, Any] = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"functionCall": call}]},
                "finishReason": "STOP",
            }
        ]
    }
    if response_id is not None:
        body["responseId"] = response_id
    return {"kind": "response", "http_status": 200, "body": body}


def gemini_final(text: str = "Your refund was submitted.") -> dict:
    content = {"role": "model", "parts": [{"text": text}]}
    body = {"candidates": [{"content": content, "finishReason": "STOP"}], "responseId": "fin"}
    return {"kind": "response", "http_status": 200, "body": body}


def chat_answers(body: dict[str, Any]) -> list[list[str]]:
    """Per assistant message with calls: the tool_call_ids answering it."""
    blocks: list[list[str]] = []
    for message in body["messages"]:
        if message["role"] == "assistant" and message.get("tool_calls"):
            blocks.append([])
        elif message["role"] == "tool":
            blocks[-1].append(message["tool_call_id"])
    return blocks


def assert_completed(operation: Operation, *, calls: int, rejected: int = 0) -> None:
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    rows = list(operation.calls.order_by("turn__index"))
    assert len(rows) == calls
    states = [row.state for row in rows]
    assert states.count(CallState.SUCCEEDED) == calls - rejected, states
    assert all(row.model_result for row in rows)  # each call has its result
    assert len({row.provider_call_id for row in rows}) == calls  # every call addressable
    assert LedgerEntry.objects.filter(operation_ref=operation.public_id).count() == 1


@pytest.mark.parametrize("response_ids", [True, False], ids=["with_response_id", "no_response_id"])
def test_chat_call_id_recurring_every_turn_completes_with_one_result_per_call(
    demo, response_ids
) -> None:
    replies = [
        chat_reply(f"chatcmpl-{n}" if response_ids else None, "call_0", name, args)
        for n, (name, args) in enumerate(STEPS)
    ]
    operation = start_family(demo, "openai_chat", [*replies, chat_final()])
    assert_completed(operation, calls=3)
    final_request = operation.turns.get(index=3).request_body
    answers = chat_answers(final_request)
    assert [len(ids) for ids in answers] == [1, 1, 1]
    flat = [call_id for ids in answers for call_id in ids]
    assert len(set(flat)) == 3  # unique on the wire, across the conversation
    sent_calls = [
        call["id"]
        for m in final_request["messages"]
        if m["role"] == "assistant" and m.get("tool_calls")
        for call in m["tool_calls"]
    ]
    assert sent_calls == flat  # each result answers the ID its call carries in the history
    rows = list(operation.calls.order_by("turn__index"))
    assert [row.provider_call_id for row in rows] == flat


@pytest.mark.parametrize("response_ids", [True, False], ids=["with_response_id", "no_response_id"])
def test_gemini_call_id_recurring_every_turn_completes_with_one_result_per_call(
    demo, response_ids
) -> None:
    replies = [
        gemini_reply("call_0", name, args, f"resp-{n}" if response_ids else None)
        for n, (name, args) in enumerate(STEPS)
    ]
    operation = start_family(demo, "gemini_generate", [*replies, gemini_final()])
    assert_completed(operation, calls=3)
    contents = operation.turns.get(index=3).request_body["contents"]
    calls = [p["functionCall"]["id"] for c in contents for p in c["parts"] if "functionCall" in p]
    answers = [
        p["functionResponse"]["id"] for c in contents for p in c["parts"] if "functionResponse" in p
    ]
    assert len(set(calls)) == 3 and answers == calls


def test_gemini_identical_replies_without_ids_complete(demo) -> None:
    # Two identical replies with neither call IDs nor a response ID (a model asking for the
    # same order twice): the second call is answered, by name and order, like the first.
    lookup = gemini_reply(None, "get_order", ORDER, None)
    replies = [
        lookup,
        lookup,
        *(gemini_reply(None, name, args, None) for name, args in STEPS[1:]),
    ]
    operation = start_family(demo, "gemini_generate", [*replies, gemini_final()])
    # The repeat is answered (NO_PROGRESS: nothing new since the same lookup), never run twice.
    assert_completed(operation, calls=4, rejected=1)
    repeat = operation.calls.get(turn__index=1)
    assert repeat.error_code == "NO_PROGRESS"
    assert repeat.provider_call_id.startswith("cg1_gcall_")
    for turn in operation.turns.filter(index__gte=1):
        contents = turn.request_body["contents"]
        for before, after in itertools.pairwise(contents):
            calls = [p for p in before["parts"] if "functionCall" in p]
            answers = [p for p in after["parts"] if "functionResponse" in p]
            if calls:
                assert len(answers) == len(calls)
                assert all("id" not in a["functionResponse"] for a in answers)


def test_chat_identical_replies_without_ids_complete(demo) -> None:
    lookup = chat_reply(None, None, "get_order", ORDER)
    replies = [lookup, lookup, *(chat_reply(None, None, name, args) for name, args in STEPS[1:])]
    operation = start_family(demo, "openai_chat", [*replies, chat_final()])
    assert_completed(operation, calls=4, rejected=1)
    assert operation.calls.get(turn__index=1).error_code == "NO_PROGRESS"
    body = operation.turns.get(index=4).request_body
    answers = [m for m in body["messages"] if m["role"] == "tool"]
    assert len(answers) == 4 and all("tool_call_id" not in m for m in answers)


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_every_family_answers_a_recurring_call_id_once_per_call(demo, family) -> None:
    replies = scripted(bundled_replies("refund_approve", family))
    again = copy.deepcopy(replies[0])
    call, _, arguments_field = CALL_IN_REPLY[family](again["body"])
    call[arguments_field] = {"order_id": "ORD-1002"}
    if family in ("openai_chat", "openai_responses"):
        call[arguments_field] = json.dumps(call[arguments_field])
    operation = start_family(demo, family, [replies[0], again, replies[-1]])
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    first, second = operation.calls.order_by("turn__index")
    assert first.provider_call_id != second.provider_call_id
    assert first.model_result and second.model_result
