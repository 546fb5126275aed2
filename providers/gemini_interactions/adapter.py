"""The Interactions adapter: conversation, request body and result shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from providers.adapter import GEMINI_TOOL_NAME, FamilyAdapter, FlatCalls
from providers.base import (
    NO_SETTINGS,
    ModelSettings,
    ParsedReply,
    ToolDeclaration,
    ToolResultMessage,
)
from providers.gemini_interactions.reply import REVISION, parse_interaction
from providers.gemini_interactions.stream import InteractionsStream
from providers.settings import (
    ANY_CHOICES,
    GEMINI_EFFORTS,
    NO_PARALLEL_SWITCH,
    Honoured,
    named_tool,
    present,
)


class GeminiInteractionsAdapter(FamilyAdapter):
    """Adapter for the Interactions API: ``function_call`` steps out, ``function_result`` in.

    The conversation is the stateless ``input`` step list: a ``user_input`` step, then every
    earlier reply's model steps replayed verbatim and in order (``thought`` steps with their
    ``signature`` included, which Gemini 3 requires for function calling), each reply followed by
    one ``function_result`` step per ``function_call.id``. Requests carry ``store: false``: the
    SDK's ``CreateModelInteraction`` has ``store`` ("whether to store the response and request
    for later retrieval"), and the migration guide's stateless alternative to
    ``previous_interaction_id`` is exactly prior steps plus results in ``input``. Nothing then
    lives at the provider, so any worker can send the next request from the stored conversation
    and a replayed or retried request is self-contained.
    """

    provider = "google"
    family = "gemini_interactions"
    revision = REVISION
    conversation_field = "input"
    flat_calls = FlatCalls("function_call", id_field="id", arguments_field="arguments", empty={})
    error_reason_fields = ("status",)
    name_pattern = GEMINI_TOOL_NAME
    honoured = Honoured(
        refused={
            "thinking_budget_tokens": "the API sets thinking by thinking_level, not by tokens",
            "parallel_tool_calls": NO_PARALLEL_SWITCH,
        },
        efforts=GEMINI_EFFORTS,
    )

    def message(self, role: str, text: str) -> Any:
        step = "model_output" if role == "assistant" else "user_input"
        return {"type": step, "content": [{"type": "text", "text": text}]}

    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        """The Interactions body (google-genai ``CreateModelInteraction``); tool declarations
        are flat (no ``function_declarations`` wrapper). Settings go in ``generation_config``:
        ``max_output_tokens``, ``temperature``, ``top_p``, ``thinking_level`` and, with tools,
        ``tool_choice`` (``auto``/``any``/``none``, or ``{"allowed_tools": {"mode": "any",
        "tools": [name]}}`` for a named tool)."""
        body: dict[str, Any] = {"model": model}
        if instructions:
            body["system_instruction"] = instructions
        body |= {
            "input": list(conversation),
            "tools": [{"type": "function", **tool.declared()} for tool in tools],
            "store": False,
        }
        config = present(
            max_output_tokens=settings.max_output_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            thinking_level=settings.reasoning_effort,
            tool_choice=_tool_choice(settings.tool_choice) if tools else None,
        )
        if config:
            body["generation_config"] = config
        return body

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        return [*conversation, *(_function_result(result) for result in results)]

    def parse_body(self, body: Mapping[str, Any], *, max_argument_bytes: int) -> ParsedReply:
        return parse_interaction(body)

    def stream_assembler(self, *, max_argument_bytes: int) -> InteractionsStream:
        return InteractionsStream(max_argument_bytes)


def _tool_choice(choice: str | None) -> Any:
    """``generation_config.tool_choice``: a ``ToolChoiceType`` for a keyword, a
    ``ToolChoiceConfig`` allowing only the named tool, ``None`` for no choice."""
    name = named_tool(choice)
    if name:
        return {"allowed_tools": {"mode": "any", "tools": [name]}}
    return None if choice is None else ANY_CHOICES[choice]


def _function_result(result: ToolResultMessage) -> dict[str, Any]:
    """One ``function_result`` step. ``name`` is always sent (the live API rejects a result
    without it); ``call_id`` is left out for a made-up ID, which the provider never issued."""
    step: dict[str, Any] = {"type": "function_result", "name": result.name}
    if not result.synthesized:
        step["call_id"] = result.call_id
    step["result"] = dict(result.model_result)
    if result.is_error:
        step["is_error"] = True
    return step
