"""OpenAI Responses API (``POST /v1/responses``): ``function_call`` items out,
``function_call_output`` items in.

Wire facts (field names, statuses, stream events, pairing rules, 400 texts) come from the API
reference "Responses" (https://platform.openai.com/docs/api-reference/responses) and "Streaming
events" (https://platform.openai.com/docs/api-reference/responses-streaming), the "Function
calling" and "Reasoning models" guides (https://platform.openai.com/docs/guides/function-calling,
https://platform.openai.com/docs/guides/reasoning), the openai-python type files
``src/openai/types/responses/*.py`` and public error reports. Modules: ``adapter`` (request
bodies, result shapes), ``reply`` (classification), ``stream`` (stream assembly) and ``rules``
(the API's own 400s, for the replay transport only).
"""

from providers.openai_responses.adapter import OpenAIResponsesAdapter

__all__ = ["OpenAIResponsesAdapter"]
