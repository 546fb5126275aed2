"""OpenAI Chat Completions (``POST /v1/chat/completions``), also for servers that copy it:
``tool_calls`` on the assistant message out, ``role: "tool"`` messages in.

Wire facts (field names, finish reasons, chunk shapes, pairing rules, 400 texts) come from the
API reference "Chat Completions" (https://platform.openai.com/docs/api-reference/chat: "Create
chat completion", "The chat completion object", "The chat completion chunk object"), the
"Function calling" guide (https://platform.openai.com/docs/guides/function-calling), the
openai-python type files ``src/openai/types/chat/*.py`` and public error reports. Modules:
``adapter`` (request bodies, result shapes), ``reply`` (classification), ``stream`` (stream
assembly) and ``rules`` (the server's own 400s, for the replay transport only).
"""

from providers.openai_chat.adapter import OpenAIChatAdapter

__all__ = ["OpenAIChatAdapter"]
