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
    UnsupportedSetting,
)
from providers.payload import obj, text
from providers.settings import ANY_CHOICES, Honoured, named_tool, present

#: ``max_tokens`` is required by the Messages API; output tokens per reply unless the operation's
#: ``max_output_tokens`` says otherwise.
MAX_TOKENS = 4096
#: The smallest ``thinking.budget_tokens`` ("Must be ≥1024 and less than ``max_tokens``",
#: anthropic SDK ``ThinkingConfigEnabledParam``).
MIN_THINKING_BUDGET = 1024
#: Why the installed SDK's ``MessageCreateParams`` cannot carry the sampling settings.
NO_SAMPLING = "the Messages API request has no {} field"


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
    revision = REVISION
    flat_calls = FlatCalls("tool_use", id_field="id", arguments_field="input", empty={})
    error_reason_fields = ("type",)
    honoured = Honoured(
        refused={
            "temperature": NO_SAMPLING.format("temperature"),
            "top_p": NO_SAMPLING.format("top_p"),
        },
        # ``output_config.effort`` (anthropic SDK ``OutputConfigParam``).
        efforts=("low", "medium", "high", "xhigh", "max"),
    )

    def check_settings(self, settings: ModelSettings, *, tool_names: Sequence[str]) -> None:
        """The shared checks, then the Messages API's own rules on combinations: a thinking
        budget of at least 1024 tokens and below ``max_tokens``, thinking only with
        ``tool_choice`` auto or none ("Extended thinking": forced tool use is incompatible
        with thinking), and ``parallel_tool_calls`` only where ``tool_choice`` has a
        ``disable_parallel_tool_use`` field (not with none)."""
        super().check_settings(settings, tool_names=tool_names)
        budget = settings.thinking_budget_tokens
        max_tokens = settings.max_output_tokens or MAX_TOKENS
        if budget is not None and not MIN_THINKING_BUDGET <= budget < max_tokens:
            raise UnsupportedSetting(
                "thinking_budget_tokens",
                f"thinking_budget_tokens must be at least {MIN_THINKING_BUDGET} and below "
                f"max_output_tokens ({max_tokens})",
            )
        forced = settings.tool_choice not in (None, "auto", "none")
        if budget is not None and forced:
            raise UnsupportedSetting(
                "tool_choice", "with thinking, tool_choice can only be auto or none"
            )
        if settings.parallel_tool_calls is not None and settings.tool_choice == "none":
            raise UnsupportedSetting(
                "parallel_tool_calls", "tool_choice none has no parallel tool use to turn off"
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
        """The Messages body (``client.messages.create`` keywords, anthropic SDK
        ``MessageCreateParams``). Settings: ``max_tokens``, ``thinking`` ``{"type": "enabled",
        "budget_tokens"}``, ``output_config.effort``, and with tools ``tool_choice``
        (``auto``/``any``/``none``/``{"type": "tool", "name"}``, with
        ``disable_parallel_tool_use`` for ``parallel_tool_calls``). Thinking blocks that come
        back are replayed verbatim, whether or not this request switched thinking on."""
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": settings.max_output_tokens or MAX_TOKENS,
        }
        if instructions:
            body["system"] = instructions
        body |= {
            "messages": list(conversation),
            "tools": [tool.declared("input_schema") for tool in tools],
        }
        budget, effort = settings.thinking_budget_tokens, settings.reasoning_effort
        body |= present(
            thinking=None if budget is None else {"type": "enabled", "budget_tokens": budget},
            output_config=None if effort is None else {"effort": effort},
            tool_choice=_tool_choice(settings) if tools else None,
        )
        return body

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


def _tool_choice(settings: ModelSettings) -> dict[str, Any] | None:
    """``tool_choice`` for the tool settings (``None``: both left to the default, auto)."""
    parallel, choice = settings.parallel_tool_calls, settings.tool_choice
    if choice is None and parallel is None:
        return None
    name = named_tool(choice)
    written: dict[str, Any] = (
        {"type": "tool", "name": name} if name else {"type": ANY_CHOICES[choice or "auto"]}
    )
    if parallel is not None:
        written["disable_parallel_tool_use"] = not parallel
    return written


def _tool_result(result: ToolResultMessage) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": json.dumps(dict(result.model_result), separators=(",", ":")),
    }
    if result.is_error:
        block["is_error"] = True
    return block
