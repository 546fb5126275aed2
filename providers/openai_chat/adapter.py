"""The Chat Completions adapter: conversation, request body and result shapes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import CallEdit, FamilyAdapter
from providers.base import (
    NO_SETTINGS,
    ModelSettings,
    ParsedReply,
    ToolDeclaration,
    ToolResultMessage,
)
from providers.openai_chat.reply import REVISION, parse_completion
from providers.openai_chat.stream import ChatStream
from providers.payload import items, obj, text
from providers.settings import NO_THINKING_BUDGET, OPENAI_EFFORTS, Honoured, named_tool, present


class OpenAIChatAdapter(FamilyAdapter):
    """Adapter for Chat Completions: ``tool_calls`` on the assistant message out, one
    ``{"role": "tool", "tool_call_id", "content"}`` message per call in.

    The conversation is the request's ``messages`` list: the user message, then each assistant
    message as the server returned it (``content``, ``refusal``, ``tool_calls`` verbatim, and a
    ``reasoning_content`` when a compatible server sent one), each immediately followed by one
    tool message per ``tool_call_id``: nothing may come between them.
    """

    provider = "openai"
    family = "openai_chat"
    revision = REVISION
    error_reason_fields = ("code", "type")
    honoured = Honoured(
        refused={"thinking_budget_tokens": NO_THINKING_BUDGET}, efforts=OPENAI_EFFORTS
    )

    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        # Keyword arguments of ``client.chat.completions.create``. ``stream`` and
        # ``stream_options`` are the transport's: the API rejects ``stream_options`` unless
        # ``stream`` is true. An empty ``tools`` array is a 400, so it is left out.
        # The instructions lead the messages as a ``developer`` message, the role the API
        # documents for instructions to o1 and later models (it replaces ``system``).
        # Settings: ``max_completion_tokens`` (``max_tokens`` is deprecated and refused by
        # reasoning models), ``temperature``, ``top_p``, ``reasoning_effort``; the tool
        # settings go only with tools (the API refuses ``parallel_tool_calls`` without them).
        system = [{"role": "developer", "content": instructions}] if instructions else []
        body: dict[str, Any] = {"model": model, "messages": [*system, *conversation]}
        body |= present(
            max_completion_tokens=settings.max_output_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            reasoning_effort=settings.reasoning_effort,
        )
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {**tool.declared(), "strict": False},
                }
                for tool in tools
            ]
            name = named_tool(settings.tool_choice)
            choice = {"type": "function", "function": {"name": name}} if name else None
            body |= present(
                tool_choice=choice or settings.tool_choice,
                parallel_tool_calls=settings.parallel_tool_calls,
            )
        return body

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        legacy = _answers_legacy_function_call(conversation)
        messages: list[dict[str, Any]] = []
        for result in results:
            content = json.dumps(dict(result.model_result), separators=(",", ":"))
            if not result.synthesized:
                messages.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": content}
                )
            elif legacy:
                # The deprecated ``function_call`` has no ID: its answer is a ``function`` message.
                messages.append({"role": "function", "name": result.name, "content": content})
            else:
                # The server sent the call without an ID; the made-up one is not sent back as if
                # it had issued it. The answer is matched by position (and name).
                messages.append({"role": "tool", "name": result.name, "content": content})
        return [*conversation, *messages]

    def edit_calls(self, assistant_items: list[Any], edits: Sequence[CallEdit | None]) -> list[Any]:
        queue = iter(edits)
        messages = []
        for item in assistant_items:
            message = dict(obj(item))
            if items(message.get("tool_calls")):
                message["tool_calls"] = [
                    _edited(call, next(queue, None)) for call in items(message["tool_calls"])
                ]
            elif obj(message.get("function_call")):
                legacy = _edited({"function": message["function_call"]}, next(queue, None))
                message["function_call"] = legacy["function"]
            messages.append(message)
        return messages

    def parse_body(self, body: Mapping[str, Any], *, max_argument_bytes: int) -> ParsedReply:
        return parse_completion(body)

    def stream_assembler(self, *, max_argument_bytes: int) -> ChatStream:
        return ChatStream(max_argument_bytes)

    def retry_codes(self, error: Mapping[str, Any], reason: str | None) -> tuple[str | None, ...]:
        # A quota code in either field means "no credit left", never worth a retry.
        return (reason, text(error.get("type")))


def _answers_legacy_function_call(conversation: Sequence[Any]) -> bool:
    """Whether the latest assistant message carries a deprecated ``function_call`` (and no
    ``tool_calls``), so its result goes back as a ``function`` message."""
    for raw in reversed(conversation):
        message = obj(raw)
        if message.get("role") == "assistant":
            return not items(message.get("tool_calls")) and bool(obj(message.get("function_call")))
    return False


def _edited(call: Mapping[str, Any], edit: CallEdit | None) -> dict[str, Any]:
    """A ``tool_calls`` entry with ``edit`` made: the ID on the entry, the name and argument
    text on its ``function`` (or a custom tool's free-text ``input``)."""
    if edit is None:
        return dict(call)
    kind = "function" if "function" in call else "custom"
    field = "arguments" if kind == "function" else "input"
    inner = edit.apply(obj(call.get(kind)), id_field="id", arguments_field=field, empty="{}")
    inner.pop("id", None)
    edited = {**call, kind: inner}
    if edit.call_id is not None:
        edited["id"] = edit.call_id
    return edited
