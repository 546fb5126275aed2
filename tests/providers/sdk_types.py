"""Request bodies checked against the official SDKs' own request types, unknown keys counted as
errors.

The SDKs' request types are TypedDicts (openai, anthropic) and pydantic models (google-genai).
A plain pydantic ``TypeAdapter`` ignores unknown TypedDict keys, lets models that allow extras
(anthropic's response blocks, which its message params accept, and google-genai's Interactions
models) keep them, and validates an ``Iterable`` field lazily, only when it is consumed. So the
validator is built from the type's core schema with every TypedDict forbidding extra keys and
every ``Iterable`` read as a list, bodies are validated as the JSON that travels, and every model
in the result must hold no extra key (pydantic-core takes a model class's own ``extra`` setting
whatever its schema says, so models are checked after validation).
(Not in pydantic's strict mode: google-genai's open enums, ``UnrecognizedStr``, accept a value
they do not list only in lax mode, as the SDK itself validates.)
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Required

from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from google.genai import types as genai
from google.genai._gaos.types.interactions.createmodelinteraction import CreateModelInteraction
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator
from typing_extensions import TypedDict


class GenerateContentRequest(TypedDict, total=False):
    """The REST body of ``generateContent`` in google-genai's own models. The SDK has no single
    type for it: its converter (``models._GenerateContentParameters_to_mldev``) builds the body
    from a ``GenerateContentConfig``, putting ``systemInstruction``, ``tools`` and
    ``toolConfig`` at the top and the sampling fields in ``generationConfig``, whose REST model
    is ``GenerationConfig``. The models take the REST camelCase names as their aliases."""

    contents: Required[list[genai.Content]]
    systemInstruction: genai.Content
    tools: list[genai.Tool]
    toolConfig: genai.ToolConfig
    generationConfig: genai.GenerationConfig


#: Each family's request type.
REQUEST_TYPES: dict[str, Any] = {
    "openai_responses": ResponseCreateParamsNonStreaming,
    "openai_chat": CompletionCreateParamsNonStreaming,
    "anthropic_messages": MessageCreateParamsNonStreaming,
    "gemini_generate": GenerateContentRequest,
    "gemini_interactions": CreateModelInteraction,
}


def _strict(node: Any) -> Any:
    """A copy of a core schema in which TypedDicts forbid extra keys and an ``Iterable`` (a
    ``generator`` schema) is a list."""
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    strict = {key: _strict(value) for key, value in node.items()}
    if strict.get("type") == "typed-dict":
        strict["extra_behavior"] = "forbid"
    if strict.get("type") == "generator":
        strict["type"] = "list"
    return strict


@functools.cache
def validator(family: str) -> SchemaValidator:
    """The strict validator of ``family``'s request type."""
    return SchemaValidator(_strict(TypeAdapter(REQUEST_TYPES[family]).core_schema))


def sdk_errors(family: str, body: Mapping[str, Any]) -> list[str]:
    """What the SDK's request type finds wrong with ``body`` (``location: message``), or
    nothing."""
    try:
        validated = validator(family).validate_json(json.dumps(body))
    except ValidationError as exc:
        return [
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        ]
    return _extra_keys(validated, "")


def _extra_keys(value: Any, location: str) -> list[str]:
    """``location.key: extra key`` for every key a model in ``value`` kept as an extra. A model
    that declares no field at all is the generator's way of writing "any JSON object" (an
    Interactions ``function_result``'s ``result``): its keys are its content."""
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        extras = value.model_extra or {} if fields else {}
        found = [f"{location}.{key}: extra key" for key in extras]
        # ``__dict__`` holds the field values; ``getattr`` would warn on deprecated fields.
        for name, item in vars(value).items():
            found += _extra_keys(item, f"{location}.{name}")
        return found
    if isinstance(value, Mapping):
        return [e for key, item in value.items() for e in _extra_keys(item, f"{location}.{key}")]
    if isinstance(value, list | tuple):
        return [e for n, item in enumerate(value) for e in _extra_keys(item, f"{location}.{n}")]
    return []
