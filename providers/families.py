"""The API families Callgate speaks, by name. An operation's family fixes its adapter."""

from __future__ import annotations

from providers.anthropic_messages import AnthropicMessagesAdapter
from providers.base import ProviderAdapter
from providers.gemini_generate import GeminiGenerateAdapter
from providers.gemini_interactions import GeminiInteractionsAdapter
from providers.openai_chat import OpenAIChatAdapter
from providers.openai_responses import OpenAIResponsesAdapter

ADAPTERS: dict[str, ProviderAdapter] = {
    adapter.family: adapter
    for adapter in (
        OpenAIResponsesAdapter(),
        OpenAIChatAdapter(),
        AnthropicMessagesAdapter(),
        GeminiGenerateAdapter(),
        GeminiInteractionsAdapter(),
    )
}


class UnknownFamily(LookupError):
    """Raised for a family name no adapter serves."""


def get_adapter(family: str) -> ProviderAdapter:
    """Return the adapter for ``family``; raises :class:`UnknownFamily`."""
    try:
        return ADAPTERS[family]
    except KeyError:
        raise UnknownFamily(f"unknown API family {family!r}; known: {sorted(ADAPTERS)}") from None
