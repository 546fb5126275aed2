"""History hygiene: a rejected call's unusable argument text or tool name never goes back to
the provider; the history shows a valid JSON object and a valid name, and the call's result
says what was wrong."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from providers.families import ADAPTERS
from tests.engine import bundled_replies, start_family
from tests.replies import scripted
from toolcalls.states import OperationState

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

BAD_TEXT = "order ORD-1001, please"
BAD_NAME = "get order!"
#: Each family's documented rule for tool names.
NAME_RULES = {
    "openai_chat": r"[A-Za-z0-9_-]{1,64}",
    "openai_responses": r"[A-Za-z0-9_-]{1,64}",
    "anthropic_messages": r"[A-Za-z0-9_-]{1,64}",
    "gemini_generate": r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}",
    "gemini_interactions": r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}",
}


def _chat_call(body: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    return body["choices"][0]["message"]["tool_calls"][0]["function"], "name", "arguments"


def _responses_call(body: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    return next(i for i in body["output"] if i["type"] == "function_call"), "name", "arguments"


def _anthropic_call(body: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    return next(b for b in body["content"] if b["type"] == "tool_use"), "name", "input"


def _generate_call(body: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    parts = body["candidates"][0]["content"]["parts"]
    return next(p["functionCall"] for p in parts if "functionCall" in p), "name", "args"


def _interactions_call(body: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    return next(s for s in body["steps"] if s["type"] == "function_call"), "name", "arguments"


CALL_IN_REPLY: dict[str, Callable[[dict[str, Any]], tuple[dict[str, Any], str, str]]] = {
    "openai_chat": _chat_call,
    "openai_responses": _responses_call,
    "anthropic_messages": _anthropic_call,
    "gemini_generate": _generate_call,
    "gemini_interactions": _interactions_call,
}


def history_calls(family: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(name, arguments)`` of every call in a stored request's history."""
    if family == "openai_chat":
        return [
            (c["function"]["name"], c["function"]["arguments"])
            for m in body["messages"]
            for c in m.get("tool_calls") or []
        ]
    if family == "openai_responses":
        return [(i["name"], i["arguments"]) for i in body["input"] if i["type"] == "function_call"]
    if family == "anthropic_messages":
        return [
            (b["name"], b["input"])
            for m in body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_use"
        ]
    if family == "gemini_generate":
        return [
            (p["functionCall"]["name"], p["functionCall"].get("args", {}))
            for c in body["contents"]
            for p in c["parts"]
            if "functionCall" in p
        ]
    return [(s["name"], s["arguments"]) for s in body["input"] if s["type"] == "function_call"]


def _as_object(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _bad_reply(family: str, first: dict[str, Any], tag: str, **change: Any) -> dict[str, Any]:
    reply = copy.deepcopy(first)
    call, name_field, arguments_field = CALL_IN_REPLY[family](reply["body"])
    if "name" in change:
        call[name_field] = change["name"]
    if "arguments" in change:
        call[arguments_field] = change["arguments"]
    for field in ("id", "call_id"):
        if field in call and field != name_field:
            call[field] = f"{call[field]}{tag}"
    return reply


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_rejected_call_goes_back_with_valid_arguments_and_name(demo, family) -> None:
    replies = scripted(bundled_replies("refund_approve", family))
    bad_arguments = _bad_reply(family, replies[0], "a", arguments=BAD_TEXT)
    bad_name = _bad_reply(family, replies[0], "b", name=BAD_NAME)
    operation = start_family(demo, family, [bad_arguments, bad_name, replies[-1]])
    assert operation.state == OperationState.COMPLETED, operation.terminal_reason
    rule = re.compile(NAME_RULES[family])
    for index in (1, 2):
        calls = history_calls(family, operation.turns.get(index=index).request_body)
        assert len(calls) == index
        for name, arguments in calls:
            assert rule.fullmatch(name), name
            assert isinstance(_as_object(arguments), dict), arguments
    first, second = operation.calls.order_by("turn__index")
    assert first.raw_arguments is not None and "ORD-1001, please" in first.raw_arguments
    assert first.model_result and second.model_result
    assert first.model_result["error"]["code"] == "INVALID_ARGUMENTS"
    assert "JSON object" in first.model_result["error"]["message"]
    assert second.tool_name == BAD_NAME  # the ledger keeps what the model sent
    assert second.model_result["error"]["code"] == "UNKNOWN_TOOL"
    assert repr(BAD_NAME) in second.model_result["error"]["message"]
