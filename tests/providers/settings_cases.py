"""Requests with instructions, earlier messages and settings for every family, shared by the
request-body and live-transport tests."""

from __future__ import annotations

from typing import Any

from providers.base import Message, ModelSettings, ToolDeclaration
from providers.families import ADAPTERS

INSTRUCTIONS = "You are the refund desk of Acme. Never refund more than was paid."
MESSAGES = (
    Message(role="user", text="Do you handle refunds for damaged items?"),
    Message(role="assistant", text="Yes: tell me the order number and what happened."),
)
TOOLS = [
    ToolDeclaration(
        name=name,
        description=f"{name} (test)",
        parameters={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
    )
    for name in ("get_order", "submit_refund")
]
TOOL_NAMES = [tool.name for tool in TOOLS]
SAMPLING = {"max_output_tokens": 2048, "temperature": 0.4, "top_p": 0.9}

#: Per family, settings that use every field it maps, and the top-level request fields they must
#: become (a family whose rules forbid some combinations has more than one such set).
MAPPED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "openai_responses",
        {
            **SAMPLING,
            "reasoning_effort": "low",
            "tool_choice": "get_order",
            "parallel_tool_calls": False,
        },
        {
            "instructions": INSTRUCTIONS,
            "max_output_tokens": 2048,
            "temperature": 0.4,
            "top_p": 0.9,
            "reasoning": {"effort": "low"},
            "tool_choice": {"type": "function", "name": "get_order"},
            "parallel_tool_calls": False,
        },
    ),
    (
        "openai_chat",
        {
            **SAMPLING,
            "reasoning_effort": "high",
            "tool_choice": "get_order",
            "parallel_tool_calls": False,
        },
        {
            "max_completion_tokens": 2048,
            "temperature": 0.4,
            "top_p": 0.9,
            "reasoning_effort": "high",
            "tool_choice": {"type": "function", "function": {"name": "get_order"}},
            "parallel_tool_calls": False,
        },
    ),
    (
        "anthropic_messages",
        {
            "max_output_tokens": 2048,
            "thinking_budget_tokens": 1024,
            "reasoning_effort": "medium",
            "tool_choice": "auto",
            "parallel_tool_calls": False,
        },
        {
            "system": INSTRUCTIONS,
            "max_tokens": 2048,
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "output_config": {"effort": "medium"},
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        },
    ),
    (
        "anthropic_messages",
        {"max_output_tokens": 512, "tool_choice": "submit_refund", "parallel_tool_calls": True},
        {
            "max_tokens": 512,
            "tool_choice": {
                "type": "tool",
                "name": "submit_refund",
                "disable_parallel_tool_use": False,
            },
        },
    ),
    (
        "gemini_generate",
        {**SAMPLING, "reasoning_effort": "low", "tool_choice": "get_order"},
        {
            "systemInstruction": {"parts": [{"text": INSTRUCTIONS}]},
            "generationConfig": {
                "maxOutputTokens": 2048,
                "temperature": 0.4,
                "topP": 0.9,
                "thinkingConfig": {"thinkingLevel": "LOW"},
            },
            "toolConfig": {
                "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_order"]}
            },
        },
    ),
    (
        "gemini_generate",
        {"thinking_budget_tokens": 4096, "tool_choice": "none"},
        {
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 4096}},
            "toolConfig": {"functionCallingConfig": {"mode": "NONE"}},
        },
    ),
    (
        "gemini_interactions",
        {**SAMPLING, "reasoning_effort": "minimal", "tool_choice": "get_order"},
        {
            "system_instruction": INSTRUCTIONS,
            "generation_config": {
                "max_output_tokens": 2048,
                "temperature": 0.4,
                "top_p": 0.9,
                "thinking_level": "minimal",
                "tool_choice": {"allowed_tools": {"mode": "any", "tools": ["get_order"]}},
            },
        },
    ),
]


def mapped_settings(family: str) -> ModelSettings:
    """The first settings of :data:`MAPPED` for ``family``."""
    return ModelSettings(**next(settings for name, settings, _ in MAPPED if name == family))


def request_body(family: str, settings: ModelSettings, **overrides: Any) -> dict[str, Any]:
    """A request of ``family`` with :data:`INSTRUCTIONS`, :data:`MESSAGES`, :data:`TOOLS` and
    ``settings`` (checked first), any build argument overridden."""
    adapter = ADAPTERS[family]
    adapter.check_settings(settings, tool_names=TOOL_NAMES)
    arguments: dict[str, Any] = {
        "model": "model-under-test",
        "conversation": adapter.start_conversation(user_input="Refund ORD-1001", messages=MESSAGES),
        "tools": TOOLS,
        "instructions": INSTRUCTIONS,
        "settings": settings,
    }
    return adapter.build_request(**(arguments | overrides))
