"""Gemini Interactions API (``POST /v1beta/interactions``, ``steps`` schema): ``function_call``
steps out, ``function_result`` steps in.

Wire facts (step and delta types, statuses, stream events, field names) come from the
Interactions guide (https://ai.google.dev/gemini-api/docs/interactions) and its "Function
calling" page (https://ai.google.dev/gemini-api/docs/interactions/function-calling), the May 2026
migration guide (https://ai.google.dev/gemini-api/docs/interactions-breaking-changes-may-2026:
``outputs`` became ``steps``), the google-genai type files
``google/genai/_gaos/types/interactions/*.py`` (``Interaction``, the ``Step`` union,
``StepStart`` / ``StepDelta`` / ``StepStop``, ``ErrorEvent``, ``CreateModelInteraction``) and
public error reports. The older ``outputs`` schema is not spoken. Modules: ``adapter`` (request
bodies, result shapes), ``reply`` (classification), ``stream`` (stream assembly) and ``rules``
(the API's own 400s, for the replay transport only).
"""

from providers.gemini_interactions.adapter import GeminiInteractionsAdapter

__all__ = ["GeminiInteractionsAdapter"]
