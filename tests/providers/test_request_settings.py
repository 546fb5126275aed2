"""Instructions, earlier messages and model settings in every family's own request fields: each
body the adapters build (and each body the bundled scenarios produce) passes the official SDK's
own request type with unknown keys counted as errors, and every setting a family cannot honour
is refused by name."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest
from anthropic.types.output_config_param import OutputConfigParam
from google.genai import types as genai
from google.genai._gaos.types.interactions.thinkinglevel import ThinkingLevel
from openai.types.shared_params.reasoning_effort import ReasoningEffort

from providers.base import (
    ModelSettings,
    Outcome,
    ToolResultMessage,
    UnsupportedSetting,
)
from providers.families import ADAPTERS
from providers.replay import ReplayTransport
from tests.providers.sdk_types import sdk_errors
from tests.providers.settings_cases import (
    INSTRUCTIONS,
    MAPPED,
    MESSAGES,
    TOOL_NAMES,
    mapped_settings,
    request_body,
)
from toolcalls import registry

SCENARIOS = Path(__file__).resolve().parents[2] / "toolcalls" / "demo" / "scenarios"
#: The settings each family refuses outright: its API has no field for them.
REFUSED: dict[str, dict[str, Any]] = {
    "openai_responses": {"thinking_budget_tokens": 1024},
    "openai_chat": {"thinking_budget_tokens": 1024},
    "anthropic_messages": {"temperature": 0.5, "top_p": 0.9},
    "gemini_generate": {"parallel_tool_calls": False},
    "gemini_interactions": {"thinking_budget_tokens": 1024, "parallel_tool_calls": False},
}

#: ``tool_choice`` keywords as each family writes them (where they land in the body).
KEYWORDS = {
    "openai_responses": lambda body: body["tool_choice"],
    "openai_chat": lambda body: body["tool_choice"],
    "anthropic_messages": lambda body: body["tool_choice"]["type"],
    "gemini_generate": lambda body: body["toolConfig"]["functionCallingConfig"]["mode"],
    "gemini_interactions": lambda body: body["generation_config"]["tool_choice"],
}
KEYWORD_VALUES = {
    "openai_responses": {"auto": "auto", "required": "required", "none": "none"},
    "openai_chat": {"auto": "auto", "required": "required", "none": "none"},
    "anthropic_messages": {"auto": "auto", "required": "any", "none": "none"},
    "gemini_generate": {"auto": "AUTO", "required": "ANY", "none": "NONE"},
    "gemini_interactions": {"auto": "auto", "required": "any", "none": "none"},
}


def _refused(family: str, tool_names: list[str] = TOOL_NAMES, **settings: Any) -> str:
    with pytest.raises(UnsupportedSetting) as refused:
        ADAPTERS[family].check_settings(ModelSettings(**settings), tool_names=tool_names)
    assert refused.value.message
    return refused.value.setting


@pytest.mark.parametrize(("family", "settings", "fields"), MAPPED, ids=lambda v: str(v)[:40])
def test_every_setting_lands_in_the_familys_own_field(
    family: str, settings: dict[str, Any], fields: dict[str, Any]
) -> None:
    body = request_body(family, ModelSettings(**settings))
    assert {name: body.get(name) for name in fields} == fields
    assert sdk_errors(family, body) == []


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_earlier_messages_come_before_the_request(family: str) -> None:
    body = json.dumps(request_body(family, ModelSettings()))
    said = [*(m.text for m in MESSAGES), "Refund ORD-1001"]
    assert sorted(said, key=body.index) == said


@pytest.mark.parametrize("family", sorted(ADAPTERS))
@pytest.mark.parametrize("keyword", ["auto", "required", "none"])
def test_tool_choice_keywords(family: str, keyword: str) -> None:
    body = request_body(family, ModelSettings(tool_choice=keyword))
    assert KEYWORDS[family](body) == KEYWORD_VALUES[family][keyword]
    assert sdk_errors(family, body) == []


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_no_settings_send_no_setting_fields(family: str) -> None:
    body = request_body(family, ModelSettings(), instructions="")
    assert sdk_errors(family, body) == []
    named = {"reasoning", "thinking", "tool_choice", "generationConfig", "generation_config"}
    assert not named & set(body)


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_tool_settings_go_only_with_tools(family: str) -> None:
    body = request_body(family, ModelSettings(max_output_tokens=1024, tool_choice="auto"), tools=[])
    assert "tool_choice" not in json.dumps(body) and "functionCallingConfig" not in json.dumps(body)
    assert sdk_errors(family, body) == []


@pytest.mark.parametrize("family", sorted(ADAPTERS))
def test_an_unknown_key_at_any_depth_is_an_sdk_error(family: str) -> None:
    body = request_body(family, mapped_settings(family))
    assert sdk_errors(family, body | {"temperature_celsius": 20})
    conversation = next(key for key in ("input", "messages", "contents") if key in body)
    body[conversation][-1]["mood"] = "cheerful"
    assert any("mood" in error for error in sdk_errors(family, body))


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "name"), [(f, name) for f, names in REFUSED.items() for name in names]
)
def test_a_setting_the_family_has_no_field_for_is_refused_by_name(family: str, name: str) -> None:
    assert _refused(family, **{name: REFUSED[family][name]}) == name


@pytest.mark.parametrize("family", sorted(ADAPTERS))
@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"max_output_tokens": 0}, "max_output_tokens"),
        ({"max_output_tokens": -5}, "max_output_tokens"),
        ({"thinking_budget_tokens": 0}, "thinking_budget_tokens"),
        ({"temperature": 2.5}, "temperature"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"tool_choice": "issue_store_credit"}, "tool_choice"),
    ],
)
def test_values_outside_the_documented_ranges_are_refused(
    family: str, settings: dict[str, Any], name: str
) -> None:
    refused = _refused(family, **settings)
    # A setting the family has no field for is refused before its value is looked at.
    assert refused == name or refused in REFUSED[family]


@pytest.mark.parametrize("family", sorted(ADAPTERS))
@pytest.mark.parametrize("name", ["tool_choice", "parallel_tool_calls"])
def test_tool_settings_need_a_tool(family: str, name: str) -> None:
    value = {"tool_choice": "auto", "parallel_tool_calls": True}[name]
    assert _refused(family, tool_names=[], **{name: value}) == name


@pytest.mark.parametrize(
    ("family", "settings", "name"),
    [
        # "Expected a value >= 16" (the Responses API's own 400).
        ("openai_responses", {"max_output_tokens": 15}, "max_output_tokens"),
        ("anthropic_messages", {"reasoning_effort": "minimal"}, "reasoning_effort"),
        ("anthropic_messages", {"thinking_budget_tokens": 1023}, "thinking_budget_tokens"),
        (
            "anthropic_messages",
            {"thinking_budget_tokens": 2048, "max_output_tokens": 2048},
            "thinking_budget_tokens",
        ),
        ("anthropic_messages", {"thinking_budget_tokens": 4096}, "thinking_budget_tokens"),
        (
            "anthropic_messages",
            {"thinking_budget_tokens": 1024, "tool_choice": "required"},
            "tool_choice",
        ),
        (
            "anthropic_messages",
            {"thinking_budget_tokens": 1024, "tool_choice": "get_order"},
            "tool_choice",
        ),
        (
            "anthropic_messages",
            {"tool_choice": "none", "parallel_tool_calls": False},
            "parallel_tool_calls",
        ),
        ("openai_chat", {"reasoning_effort": "xlow"}, "reasoning_effort"),
        ("gemini_generate", {"reasoning_effort": "max"}, "reasoning_effort"),
        (
            "gemini_generate",
            {"reasoning_effort": "low", "thinking_budget_tokens": 1024},
            "thinking_budget_tokens",
        ),
        ("gemini_interactions", {"reasoning_effort": "none"}, "reasoning_effort"),
    ],
)
def test_the_familys_own_rules_refuse_by_name(
    family: str, settings: dict[str, Any], name: str
) -> None:
    assert _refused(family, **settings) == name


def _literals(annotation: Any) -> list[str]:
    """The values of every ``Literal`` in ``annotation`` (through ``Optional`` and unions)."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    return [value for arg in typing.get_args(annotation) for value in _literals(arg)]


@pytest.mark.parametrize(
    ("family", "sdk_values"),
    [
        ("openai_responses", _literals(ReasoningEffort)),
        ("openai_chat", _literals(ReasoningEffort)),
        ("anthropic_messages", _literals(typing.get_type_hints(OutputConfigParam)["effort"])),
        (
            "gemini_generate",
            [
                level.value.lower()
                for level in genai.ThinkingLevel
                if level.name != "THINKING_LEVEL_UNSPECIFIED"
            ],
        ),
        ("gemini_interactions", _literals(ThinkingLevel)),
    ],
)
def test_reasoning_effort_takes_exactly_the_sdks_own_values(
    family: str, sdk_values: list[str]
) -> None:
    """Each SDK value is accepted, and every other family's value the SDK lacks is refused."""
    for value in sdk_values:
        ADAPTERS[family].check_settings(ModelSettings(reasoning_effort=value), tool_names=[])
    others = {"none", "minimal", "low", "medium", "high", "xhigh", "max"} - set(sdk_values)
    for value in others:
        assert _refused(family, reasoning_effort=value) == "reasoning_effort"


# --- bundled scenarios -------------------------------------------------------------------------


def _scenario_bodies(path: Path) -> list[dict[str, Any]]:
    """Every request body a bundled scenario produces, driven as the engine drives it (the
    registry's tools offered, every call answered ok), with instructions, earlier messages and
    the family's first settings of :data:`MAPPED`."""
    scenario = json.loads(path.read_text(encoding="utf-8"))
    family = scenario["family"]
    adapter = ADAPTERS[family]
    settings = mapped_settings(family)
    transport = ReplayTransport(adapter=adapter, replies=scenario["replies"])
    conversation = adapter.start_conversation(user_input=scenario["input"], messages=MESSAGES)
    tools = registry.declarations(registry.names())
    bodies = []
    for turn in range(len(scenario["replies"])):
        body = adapter.build_request(
            model=scenario["model"],
            conversation=conversation,
            tools=tools,
            instructions=INSTRUCTIONS,
            settings=settings,
        )
        bodies.append(body)
        parsed = adapter.parse_reply(transport.send(request=body, turn=turn))
        assert parsed.outcome is not Outcome.API_FAILURE, parsed.error_message
        if parsed.outcome is not Outcome.TOOL_PROPOSALS:
            break
        conversation = adapter.append_reply(conversation=conversation, reply=parsed)
        results = [
            ToolResultMessage(
                call_id=call.call_id,
                name=call.name,
                model_result={"status": "ok", "data": {}},
                is_error=False,
                synthesized=call.synthesized,
            )
            for call in parsed.calls
        ]
        conversation = adapter.append_results(conversation=conversation, results=results)
    return bodies


@pytest.mark.parametrize(
    "path", sorted(SCENARIOS.glob("*/*.json")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_every_request_a_bundled_scenario_produces_passes_the_sdk_type(path: Path) -> None:
    bodies = _scenario_bodies(path)
    assert bodies
    for turn, body in enumerate(bodies):
        assert sdk_errors(path.parent.name, body) == [], f"request {turn}"
