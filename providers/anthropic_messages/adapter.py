"""The Messages adapter: conversation, request body and result shapes."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import FamilyAdapter, FlatCalls
from providers.anthropic_messages.reply import REVISION, parse_message
from providers.anthropic_messages.stream import MessagesStream
from providers.base import (
    NO_SETTINGS,
    ModelSettings,
    ParsedReply,
    ToolDeclaration,
    ToolResultMessage,
)
from providers.payload import obj, text

#: ``max_tokens`` is required by the Messages API; output tokens per reply.
MAX_TOKENS = 4096


class AnthropicMessagesAdapter(FamilyAdapter):
    """Adapter for the Messages API: ``tool_use`` blocks out, ``tool_result`` blocks in.

    The conversation is the request's ``messages`` list: the user message, then each reply's
    ``content`` array replayed verbatim as one assistant message (thinking and
    redacted_thinking blocks with their ``signature``/``data`` untouched, text, tool_use,
    server_tool_use), each followed by one user message whose content is one ``tool_result``
    block per ``tool_use`` id. A paused turn (``pause_turn``) is sent back as it came, with no
    results, so the server continues it.
    """

    provider = "anthropic"
    family = "anthropic_messages"
    conversation_field = "messages"
    revision = REVISION
    flat_calls = FlatCalls("tool_use", id_field="id", arguments_field="input", empty={})
    error_reason_fields = ("type",)

    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        # Extended thinking is not switched on here: it is model-dependent and Callgate has no
        # per-operation setting for it. Thinking blocks that come back are replayed verbatim.
        body: dict[str, Any] = {"model": model, "max_tokens": MAX_TOKENS}
        if instructions:
            body["system"] = instructions
        return body | {
            "messages": list(conversation),
            "tools": [tool.declared("input_schema") for tool in tools],
        }

    def append_reply(self, *, conversation: Sequence[Any], reply: ParsedReply) -> list[Any]:
        # The content array goes back as it came: the API checks thinking signatures and needs
        # a paused turn's server_tool_use blocks to continue it. A copy, so later edits of the
        # conversation cannot reach the parsed reply (or the other way round).
        if not reply.assistant_items:
            return list(conversation)
        content = copy.deepcopy(list(reply.assistant_items))
        return [*conversation, {"role": "assistant", "content": content}]

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        # One user message holding only tool_result blocks, so they are first in it. This
        # adapter never synthesizes call IDs (a tool_use without an id is MALFORMED), so every
        # tool_use_id is one the provider issued.
        blocks = [_tool_result(result) for result in results]
        if not blocks:
            return list(conversation)
        return [*conversation, {"role": "user", "content": blocks}]

    def parse_body(self, body: Mapping[str, Any], *, max_argument_bytes: int) -> ParsedReply:
        return parse_message(body)

    def stream_assembler(self, *, max_argument_bytes: int) -> MessagesStream:
        return MessagesStream(max_argument_bytes)

    def retry_codes(self, error: Mapping[str, Any], reason: str | None) -> tuple[str | None, ...]:
        # A spend cap shows as ``error.details.error_code`` and is never retried.
        return (text(obj(error.get("details")).get("error_code")) or reason,)


def _tool_result(result: ToolResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": json.dumps(dict(result.model_result), separators=(",", ":")),
    }
    if result.is_error:
        block["is_error"] = True
    return block
