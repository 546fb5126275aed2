"""The generateContent adapter: conversation, request body and result shapes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from providers.adapter import GEMINI_TOOL_NAME, CallEdit, FamilyAdapter
from providers.base import (
    NO_SETTINGS,
    ModelSettings,
    ParsedReply,
    ToolDeclaration,
    ToolResultMessage,
    UnsupportedSetting,
)
from providers.gemini_generate.reply import REVISION, parse_response
from providers.gemini_generate.stream import GenerateStream
from providers.payload import items, obj, text
from providers.settings import (
    ANY_CHOICES,
    GEMINI_EFFORTS,
    NO_PARALLEL_SWITCH,
    Honoured,
    named_tool,
    present,
)


class GeminiGenerateAdapter(FamilyAdapter):
    """Adapter for ``generateContent``: ``functionCall`` parts out, ``functionResponse`` parts in.

    The conversation is the request's ``contents`` list of ``Content`` objects
    (``{"role": "user" | "model", "parts": [Part, ...]}``): the user's text, then each model
    turn replayed verbatim (every part, ``thoughtSignature`` included), each followed by one
    ``role: "user"`` content holding one ``functionResponse`` part per ``functionCall`` part, in
    call order (google-genai ``chats.py`` builds history the same way).
    """

    provider = "google"
    family = "gemini_generate"
    revision = REVISION
    conversation_field = "contents"
    error_reason_fields = ("status",)
    name_pattern = GEMINI_TOOL_NAME
    honoured = Honoured(refused={"parallel_tool_calls": NO_PARALLEL_SWITCH}, efforts=GEMINI_EFFORTS)

    def message(self, role: str, text: str) -> Any:
        return {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}

    def check_settings(self, settings: ModelSettings, *, tool_names: Sequence[str]) -> None:
        """The shared checks, and not both a thinking level and a budget ("You cannot use
        both thinking_level and the legacy thinking_budget parameter in the same request",
        Gemini thinking guide)."""
        super().check_settings(settings, tool_names=tool_names)
        if settings.reasoning_effort is not None and settings.thinking_budget_tokens is not None:
            raise UnsupportedSetting(
                "thinking_budget_tokens",
                "set reasoning_effort or thinking_budget_tokens, not both",
            )

    def build_request(
        self,
        *,
        model: str,
        conversation: Sequence[Any],
        tools: Sequence[ToolDeclaration],
        instructions: str = "",
        settings: ModelSettings = NO_SETTINGS,
    ) -> dict[str, Any]:
        """The REST body of ``POST /v1beta/models/{model}:generateContent``.

        The model is part of the URL path, not of the body (google-genai ``models.py``
        ``_GenerateContentParameters_to_mldev`` binds it to ``_url.model``), so the transport
        takes it from the operation. Parameters go in ``parametersJsonSchema`` (JSON Schema,
        "mutually exclusive with ``parameters``", google-genai ``types.FunctionDeclaration``):
        the registry's schemas set ``additionalProperties: false``, which the OpenAPI-subset
        ``parameters`` field rejects with ``Invalid JSON payload received. Unknown name
        "additionalProperties"``. ``toolConfig`` is sent only with tools: a calling config
        without declarations is itself an invalid request.

        Settings go in ``generationConfig`` (``maxOutputTokens``, ``temperature``, ``topP``,
        ``thinkingConfig`` with ``thinkingLevel`` or ``thinkingBudget``) and
        ``toolConfig.functionCallingConfig`` (``mode``, and ``allowedFunctionNames`` for a
        named tool), the REST names of google-genai's ``GenerationConfig`` and ``ToolConfig``.
        """
        body: dict[str, Any] = {"contents": list(conversation)}
        if instructions:
            body["systemInstruction"] = {"parts": [{"text": instructions}]}
        if tools:
            body["tools"] = [
                {"functionDeclarations": [tool.declared("parametersJsonSchema") for tool in tools]}
            ]
            body["toolConfig"] = {"functionCallingConfig": _calling_config(settings.tool_choice)}
        config = _generation_config(settings)
        if config:
            body["generationConfig"] = config
        return body

    def append_results(
        self, *, conversation: Sequence[Any], results: Sequence[ToolResultMessage]
    ) -> list[Any]:
        """One ``role: "user"`` content with one ``functionResponse`` part per result.

        ``response`` is the model-facing envelope as is: an error envelope carries an ``error``
        key, which Gemini reads as error details ("Use "output" key to specify function output
        and "error" key to specify error details", ``types.FunctionResponse``); the API has no
        separate error flag. The provider's ``id`` is echoed; a synthesized ID is left out, so
        Gemini pairs that response by name and order. Parts follow the order of the
        ``functionCall`` parts of the last model turn.
        """
        if not results:
            return list(conversation)
        ordered = _in_call_order(results, _last_model_calls(conversation))
        parts = [{"functionResponse": _function_response(result)} for result in ordered]
        return [*conversation, {"role": "user", "parts": parts}]

    def edit_calls(self, assistant_items: list[Any], edits: Sequence[CallEdit | None]) -> list[Any]:
        queue = iter(edits)
        return [
            {**content, "parts": [_edited(part, queue) for part in items(content.get("parts"))]}
            for content in items(assistant_items)
        ]

    def parse_body(self, body: Mapping[str, Any], *, max_argument_bytes: int) -> ParsedReply:
        return parse_response(body, max_argument_bytes)

    def stream_assembler(self, *, max_argument_bytes: int) -> GenerateStream:
        return GenerateStream(max_argument_bytes)


def _generation_config(settings: ModelSettings) -> dict[str, Any]:
    effort, budget = settings.reasoning_effort, settings.thinking_budget_tokens
    thinking = present(thinkingLevel=effort and effort.upper(), thinkingBudget=budget)
    return present(
        maxOutputTokens=settings.max_output_tokens,
        temperature=settings.temperature,
        topP=settings.top_p,
        thinkingConfig=thinking or None,
    )


def _calling_config(choice: str | None) -> dict[str, Any]:
    """``functionCallingConfig`` for ``tool_choice`` (google-genai ``FunctionCallingConfigMode``;
    none given: ``AUTO``, the API's default, said explicitly); a named tool is ``ANY`` with
    ``allowedFunctionNames``."""
    name = named_tool(choice)
    if name:
        return {"mode": "ANY", "allowedFunctionNames": [name]}
    return {"mode": ANY_CHOICES[choice or "auto"].upper()}


def _last_model_calls(conversation: Sequence[Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """``(part position, functionCall)`` of the last ``role: "model"`` content, in order."""
    for content in reversed(items(list(conversation))):
        if content.get("role") == "model":
            return [
                (index, obj(part.get("functionCall")))
                for index, part in enumerate(items(content.get("parts")))
                if "functionCall" in part
            ]
    return []


def _in_call_order(
    results: Sequence[ToolResultMessage], calls: Sequence[tuple[int, Mapping[str, Any]]]
) -> list[ToolResultMessage]:
    """``results`` reordered to follow ``calls``: a call with a provider ``id`` takes the result
    with that ID; one without takes the synthesized result made up for its part position (see
    :func:`providers.gemini_generate.reply.synthesized_call_id`), else the next synthesized
    result of the same name. Results that match no call keep their order at the end."""
    remaining = list(results)
    ordered: list[ToolResultMessage] = []
    for position, call in calls:
        wire_id = text(call.get("id"))
        if wire_id:
            found = [r for r in remaining if not r.synthesized and r.call_id == wire_id]
        else:
            named = [r for r in remaining if r.synthesized and r.name == call.get("name")]
            suffix = f"_{position}"
            found = [r for r in named if r.call_id.endswith(suffix)] + named
        if found:
            ordered.append(found[0])
            remaining.remove(found[0])
    return [*ordered, *remaining]


def _function_response(result: ToolResultMessage) -> dict[str, Any]:
    response: dict[str, Any] = {"name": result.name, "response": dict(result.model_result)}
    if not result.synthesized:
        response = {"id": result.call_id, **response}
    return response


def _edited(part: Mapping[str, Any], queue: Iterator[CallEdit | None]) -> Mapping[str, Any]:
    """A ``functionCall`` part with the next edit made to its call; its ``thoughtSignature``
    and every other field as they came."""
    if "functionCall" not in part:
        return part
    edit = next(queue, None)
    if edit is None:
        return part
    call = edit.apply(obj(part["functionCall"]), id_field="id", arguments_field="args", empty={})
    return {**part, "functionCall": call}
