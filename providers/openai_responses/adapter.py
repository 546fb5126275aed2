"""The Responses adapter: conversation, request body and result shapes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import FamilyAdapter, FlatCalls
from providers.base import (
    NO_SETTINGS,
    ModelSettings,
    ParsedReply,
    ToolDeclaration,
    ToolResultMessage,
)
from providers.openai_responses.reply import REVISION, parse_response
from providers.openai_responses.stream import ResponsesStream
from providers.settings import NO_THINKING_BUDGET, OPENAI_EFFORTS, Honoured, named_tool, present


class OpenAIResponsesAdapter(FamilyAdapter):
    """Adapter for the Responses API: ``function_call`` items out, ``function_call_output`` in.

    The conversation is the Responses ``input`` list: the user message, then every earlier
    ``output`` list replayed verbatim and in order (reasoning items included, as the API requires
    for reasoning models), each followed by one ``function_call_output`` per ``call_id``.
    """

    provider = "openai"
    family = "openai_responses"
    revision = REVISION
    conversation_field = "input"
    flat_calls = FlatCalls(
        "function_call", id_field="call_id", arguments_field="arguments", empty="{}"
    )
    error_reason_fields = ("code", "type")
    # The API's own 400 below 16: "Invalid 'max_output_tokens': integer below minimum value.
    # Expected a value >= 16" (``integer_below_min_value``, public error reports).
    honoured = Honoured(
        refused={"thinking_budget_tokens": NO_THINKING_BUDGET},
        efforts=OPENAI_EFFORTS,
        min_output_tokens=16,
    )

    def message(self, role: str, text: str) -> Any:
        return {"type": "message", "role": role, "content": text}

    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        """The Responses body (``client.responses.create`` keywords, openai SDK
        ``ResponseCreateParams``). ``store: false`` keeps no state at the provider; the
        encrypted reasoning content lets the next request replay reasoning items without it.
        Settings: ``max_output_tokens``, ``temperature``, ``top_p``, ``reasoning.effort``, and
        with tools ``tool_choice`` (a keyword, or ``{"type": "function", "name"}``) and
        ``parallel_tool_calls``."""
        body: dict[str, Any] = {"model": model}
        if instructions:
            body["instructions"] = instructions
        body |= {
            "input": list(conversation),
            "tools": [{"type": "function", **tool.declared(), "strict": False} for tool in tools],
            "store": False,
            "include": ["reasoning.encrypted_content"],
        }
        return body | _settings(settings, offers_tools=bool(tools))

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        outputs = [
            {
                "type": "function_call_output",
                "call_id": result.call_id,
                "output": json.dumps(dict(result.model_result), separators=(",", ":")),
            }
            for result in results
        ]
        return [*conversation, *outputs]

    def parse_body(self, body: Mapping[str, Any], *, max_argument_bytes: int) -> ParsedReply:
        return parse_response(body)

    def stream_assembler(self, *, max_argument_bytes: int) -> ResponsesStream:
        return ResponsesStream(max_argument_bytes)


def _settings(settings: ModelSettings, *, offers_tools: bool) -> dict[str, Any]:
    effort = settings.reasoning_effort
    fields = present(
        max_output_tokens=settings.max_output_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        reasoning=None if effort is None else {"effort": effort},
    )
    if offers_tools:
        name = named_tool(settings.tool_choice)
        choice = {"type": "function", "name": name} if name else settings.tool_choice
        fields |= present(tool_choice=choice, parallel_tool_calls=settings.parallel_tool_calls)
    return fields
