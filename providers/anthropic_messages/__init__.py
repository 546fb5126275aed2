"""Anthropic Messages API (``POST /v1/messages``): ``tool_use`` blocks out, ``tool_result``
blocks in.

Wire facts (field names, stop reasons, stream events, pairing rules, 400 texts) come from the API
reference "Messages" (https://platform.claude.com/docs/en/api/messages), "Streaming Messages",
"Handling stop reasons", "Handle tool calls", "Extended thinking" and "Errors" (each cited where
used), the anthropic-sdk-python type files ``src/anthropic/types/*.py`` and public error reports.
Modules: ``adapter`` (request bodies, result shapes), ``reply`` (classification), ``stream``
(stream assembly) and ``rules`` (the API's own 400s, for the replay transport only).
"""

from providers.anthropic_messages.adapter import AnthropicMessagesAdapter

__all__ = ["AnthropicMessagesAdapter"]
