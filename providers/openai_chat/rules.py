"""The Chat Completions server's own request rules, for the replay transport only.

Texts and envelope from public error reports of the API (``type: invalid_request_error``); the
pairing rule (an assistant message with ``tool_calls`` is followed by one tool message per
``tool_call_id``) is in the "Function calling" guide
(https://platform.openai.com/docs/guides/function-calling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from providers.base import ParsedReply, WireReply
from providers.openai_chat.reply import call_name
from providers.payload import items, obj, text
from providers.rejections import openai_invalid_request


def request_error(*, request: Mapping[str, Any], previous: ParsedReply) -> WireReply | None:
    """The server's 400 when ``messages`` breaks the pairing of calls and tool messages, leaves
    a call of ``previous`` unanswered, or drops a ``reasoning_content`` the server requires back;
    ``None`` when it is acceptable."""
    raw = request.get("messages")
    messages = list(raw) if isinstance(raw, Sequence) and not isinstance(raw, str) else []
    return (
        _pairing_error(messages)
        or _unsent_calls(messages, previous)
        or _missing_reasoning(messages, previous)
    )


@dataclass
class _Slot:
    """One call of an assistant message, waiting for its answer."""

    call_id: str | None
    name: str | None
    legacy: bool = False
    answered_at: int | None = None


@dataclass
class _Block:
    """The calls of the latest assistant message, answered by the messages right after it."""

    slots: list[_Slot] = field(default_factory=list)

    def unanswered(self) -> list[str]:
        return [slot.call_id or slot.name or "" for slot in self.slots if slot.answered_at is None]


def _slots(message: Mapping[str, Any]) -> list[_Slot]:
    slots = [
        _Slot(call_id=text(call.get("id")) or None, name=call_name(call))
        for call in items(message.get("tool_calls"))
    ]
    legacy = obj(message.get("function_call"))
    if not slots and legacy:
        slots.append(_Slot(call_id=None, name=text(legacy.get("name")), legacy=True))
    return slots


def _pairing_error(messages: Sequence[Any]) -> WireReply | None:
    """Walk ``messages`` as the server does: an assistant message with ``tool_calls`` must be
    followed, with nothing in between, by exactly one tool message per ``tool_call_id``; a tool
    message must answer a call of the assistant message right before its run of tool messages.
    Calls the server sent without an ID are answered, in order, by tool messages without one.
    """
    block: _Block | None = None
    for index, raw in enumerate(messages):
        message = obj(raw)
        role = message.get("role")
        if role == "tool":
            if block is None:
                return _orphan_tool_message(index)
            problem = _answer(block, message, index)
            if problem is not None:
                return problem
            continue
        if role == "function" and block is not None:
            legacy = next(
                (
                    s
                    for s in block.slots
                    if s.legacy and s.answered_at is None and s.name == message.get("name")
                ),
                None,
            )
            if legacy is not None:
                legacy.answered_at = index
                continue
        if block is not None and block.unanswered():
            return _missing_tool_messages(block.unanswered(), f"messages.[{index}].role")
        block = None
        if role == "assistant":
            slots = _slots(message)
            block = _Block(slots) if slots else None
    if block is not None and block.unanswered():
        return _missing_tool_messages(block.unanswered(), "messages")
    return None


def _answer(block: _Block, message: Mapping[str, Any], index: int) -> WireReply | None:
    if "tool_call_id" not in message or message.get("tool_call_id") is None:
        slot = next(
            (
                s
                for s in block.slots
                if s.call_id is None and not s.legacy and s.answered_at is None
            ),
            None,
        )
        if slot is None:
            return openai_invalid_request(
                f"Missing required parameter: 'messages.[{index}].tool_call_id'.",
                param=f"messages.[{index}].tool_call_id",
                code="missing_required_parameter",
            )
        slot.answered_at = index
        return None
    call_id = message.get("tool_call_id")
    slot = next((s for s in block.slots if s.call_id is not None and s.call_id == call_id), None)
    if slot is None:
        return openai_invalid_request(
            f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' of "
            "previous message.",
            param=f"messages.[{index}].tool_call_id",
        )
    if slot.answered_at is not None:
        return openai_invalid_request(
            f"Invalid parameter: Duplicate value for 'tool_call_id' of '{call_id}', in "
            f"messages[{slot.answered_at}] and messages[{index}].",
            param=f"messages.[{index}].tool_call_id",
        )
    slot.answered_at = index
    return None


def _unsent_calls(messages: Sequence[Any], previous: ParsedReply) -> WireReply | None:
    """Every call of ``previous`` must be in the request, on its last assistant message (whose
    answers :func:`_pairing_error` has already checked). A request that left the assistant
    message out altogether leaves those calls unanswered. The API keeps no state between
    requests, so a call is recognised by its place: the client may give a call an ID
    of its own, as long as the call and its answer carry the same one."""
    if not previous.calls:
        return None
    last = next((obj(m) for m in reversed(messages) if obj(m).get("role") == "assistant"), None)
    slots = _slots(last) if last is not None else []
    sent = [slot.call_id is not None for slot in slots]
    missing = [
        c.call_id
        for position, c in enumerate(previous.calls)
        if not c.synthesized and sent[position : position + 1] != [True]
    ]
    unnamed = sum(1 for slot in slots if slot.call_id is None)
    synthesized = [c.call_id for c in previous.calls if c.synthesized]
    missing += synthesized[unnamed:]
    if missing:
        return _missing_tool_messages(missing, "messages")
    return None


def _missing_reasoning(messages: Sequence[Any], previous: ParsedReply) -> WireReply | None:
    """Servers that think before calling tools (``reasoning_content`` on the assistant message)
    require it back on that message while the tool loop goes on; OpenAI itself never sends it.
    Text: https://api-docs.deepseek.com/guides/thinking_mode#tool-calls (public error reports)."""
    if not previous.calls:
        return None
    sent = [obj(item) for item in previous.assistant_items]
    if not any(isinstance(item.get("reasoning_content"), str) for item in sent):
        return None
    for index in range(len(messages) - 1, -1, -1):
        message = obj(messages[index])
        if message.get("role") == "assistant":
            if isinstance(message.get("reasoning_content"), str):
                return None
            return openai_invalid_request(
                "Missing `reasoning_content` field in the assistant message at message index "
                f"{index}. For more information, please refer to "
                "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
                param=None,
                code="invalid_request_error",
            )
    return None


def _orphan_tool_message(index: int) -> WireReply:
    return openai_invalid_request(
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'.",
        param=f"messages.[{index}].role",
    )


def _missing_tool_messages(call_ids: Sequence[str], param: str) -> WireReply:
    return openai_invalid_request(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(call_ids),
        param=param,
    )
