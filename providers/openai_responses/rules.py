"""The Responses API's own request rules, for the replay transport only.

Texts and envelope from public error reports of the API (``type: invalid_request_error``,
``param: input``, ``code: null``); the rule to replay reasoning items with the calls they
preceded is in the "Reasoning models" guide (https://platform.openai.com/docs/guides/reasoning).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from providers.base import ParsedReply, WireReply
from providers.payload import items
from providers.rejections import openai_invalid_request


def request_error(*, request: Mapping[str, Any], previous: ParsedReply) -> WireReply | None:
    """The Responses API's 400 when ``request`` does not answer every call of ``previous``
    exactly once with a ``function_call_output`` for a ``function_call`` it holds, or replays a
    reasoning model's call without its reasoning item; ``None`` when it is acceptable."""
    given = items(request.get("input"))
    known_calls = {item.get("call_id") for item in given if item.get("type") == "function_call"}
    outputs = Counter(
        item.get("call_id") for item in given if item.get("type") == "function_call_output"
    )
    for call_id in outputs:
        if call_id not in known_calls:
            return _invalid_request(
                f"No tool call found for function call output with call_id {call_id}."
            )
    for call in previous.calls:
        if outputs[call.call_id] == 0:
            return _invalid_request(f"No tool output found for function call {call.call_id}.")
        if outputs[call.call_id] > 1:
            return _invalid_request(f"Duplicate function_call_output for call_id {call.call_id}.")
    return _missing_reasoning(given, previous)


def _missing_reasoning(given: list[Mapping[str, Any]], previous: ParsedReply) -> WireReply | None:
    """A reasoning model's function_call must come back with the reasoning item before it."""
    replayed = {item.get("id") for item in given}
    reasoning = [i for i in items(list(previous.assistant_items)) if i.get("type") == "reasoning"]
    for item in items(list(previous.assistant_items)):
        if item.get("type") == "function_call" and reasoning and item.get("id") in replayed:
            missing = [r.get("id") for r in reasoning if r.get("id") not in replayed]
            if missing:
                return _invalid_request(
                    f"Item '{item.get('id')}' of type 'function_call' was provided without its "
                    f"required 'reasoning' item: '{missing[0]}'."
                )
    return None


def _invalid_request(message: str) -> WireReply:
    return openai_invalid_request(message, param="input")
