"""Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` (REST, camelCase):
``functionCall`` parts out, ``functionResponse`` parts in.

Wire facts (field names, finish reasons, stream chunks, pairing rules, 400 texts) come from the
API reference "Generating content" (https://ai.google.dev/api/generate-content), the guides
"Function calling with the Gemini API" (https://ai.google.dev/gemini-api/docs/function-calling)
and "Thought signatures" (https://ai.google.dev/gemini-api/docs/thought-signatures), the
"Troubleshooting guide" (https://ai.google.dev/gemini-api/docs/troubleshooting), the google-genai
files ``google/genai/types.py``, ``models.py``, ``chats.py``, ``_api_client.py`` and public error
reports. Modules: ``adapter`` (request bodies, result shapes), ``reply`` (classification),
``stream`` (stream assembly) and ``rules`` (Gemini's own 400s, for the replay transport only).
"""

from providers.gemini_generate.adapter import GeminiGenerateAdapter

__all__ = ["GeminiGenerateAdapter"]
