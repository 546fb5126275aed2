"""The tool results a request sends back, read from each family's wire format exactly as its
adapter writes them (``append_results``): what a scripted model answering ``ok`` or ``error``
(the replay transport, and so the fake server) needs to know.

Only the results after the request's last model turn count: those answering the calls of the
reply before it. Each reader returns them as :class:`ToolResultMessage` in request order;
``call_id`` and ``name`` are what the result carries on the wire (``""`` where it carries none),
``model_result`` the envelope it holds (``{}`` when that is not a JSON object).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from providers.base import ToolResultMessage
from providers.payload import items, obj, text


def _openai_responses(request: Mapping[str, Any]) -> list[ToolResultMessage]:
    """``function_call_output`` items of ``input`` after its last ``function_call``; ``output``
    is the envelope's JSON text (Responses API, "Function calling" guide)."""
    outputs = _after_last(items(request.get("input")), _typed("function_call"))
    return [
        _from_envelope(item.get("call_id"), "", _parsed(item.get("output")))
        for item in outputs
        if item.get("type") == "function_call_output"
    ]


def _openai_chat(request: Mapping[str, Any]) -> list[ToolResultMessage]:
    """``role: "tool"`` (or the deprecated ``role: "function"``) messages after the last
    ``role: "assistant"`` one; ``content`` is the envelope's JSON text (Chat Completions,
    "Function calling" guide)."""
    answers = _after_last(items(request.get("messages")), _role("assistant"))
    return [
        _from_envelope(
            message.get("tool_call_id"), message.get("name"), _parsed(message.get("content"))
        )
        for message in answers
        if message.get("role") in ("tool", "function")
    ]


def _anthropic_messages(request: Mapping[str, Any]) -> list[ToolResultMessage]:
    """``tool_result`` blocks of the messages after the last ``role: "assistant"`` one; an error
    carries ``is_error: true`` (Messages API, "Handling tool use and tool results")."""
    messages = _after_last(items(request.get("messages")), _role("assistant"))
    return [
        ToolResultMessage(
            call_id=text(block.get("tool_use_id")) or "",
            name="",
            model_result=_parsed(block.get("content")),
            is_error=block.get("is_error") is True,
        )
        for message in messages
        for block in items(message.get("content"))
        if block.get("type") == "tool_result"
    ]


def _gemini_generate(request: Mapping[str, Any]) -> list[ToolResultMessage]:
    """``functionResponse`` parts of the contents after the last ``role: "model"`` one; an error
    is a ``response`` with an ``error`` key ("Use "output" key to specify function output and
    "error" key to specify error details", ``types.FunctionResponse``)."""
    contents = _after_last(items(request.get("contents")), _role("model"))
    responses = [
        obj(part.get("functionResponse"))
        for content in contents
        for part in items(content.get("parts"))
        if "functionResponse" in part
    ]
    return [
        ToolResultMessage(
            call_id=text(answer.get("id")) or "",
            name=text(answer.get("name")) or "",
            model_result=obj(answer.get("response")),
            is_error="error" in obj(answer.get("response")),
        )
        for answer in responses
    ]


def _gemini_interactions(request: Mapping[str, Any]) -> list[ToolResultMessage]:
    """``function_result`` steps of ``input`` after its last ``function_call``; an error carries
    ``is_error: true`` (Interactions API, ``FunctionResultContent``)."""
    steps = _after_last(items(request.get("input")), _typed("function_call"))
    return [
        ToolResultMessage(
            call_id=text(step.get("call_id")) or "",
            name=text(step.get("name")) or "",
            model_result=obj(step.get("result")),
            is_error=step.get("is_error") is True,
        )
        for step in steps
        if step.get("type") == "function_result"
    ]


def _after_last(
    entries: Sequence[Mapping[str, Any]], is_model: Callable[[Mapping[str, Any]], bool]
) -> list[Mapping[str, Any]]:
    """The entries after the last one ``is_model`` picks (all of them when none is)."""
    model = [index for index, entry in enumerate(entries) if is_model(entry)]
    return list(entries[model[-1] + 1 :] if model else entries)


def _typed(kind: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda entry: entry.get("type") == kind


def _role(role: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda entry: entry.get("role") == role


def _parsed(value: Any) -> Mapping[str, Any]:
    """The JSON object a result's text holds, else ``{}``."""
    try:
        return obj(json.loads(value)) if isinstance(value, str) else {}
    except ValueError:
        return {}


def _from_envelope(call_id: Any, name: Any, envelope: Mapping[str, Any]) -> ToolResultMessage:
    """A result sent as envelope text, which says it is an error (``"status": "error"``)."""
    return ToolResultMessage(
        call_id=text(call_id) or "",
        name=text(name) or "",
        model_result=envelope,
        is_error=envelope.get("status") == "error",
    )


#: Each family's reader of the results a request sends back, by family name.
SENT_RESULTS: dict[str, Callable[[Mapping[str, Any]], list[ToolResultMessage]]] = {
    "openai_responses": _openai_responses,
    "openai_chat": _openai_chat,
    "anthropic_messages": _anthropic_messages,
    "gemini_generate": _gemini_generate,
    "gemini_interactions": _gemini_interactions,
}
