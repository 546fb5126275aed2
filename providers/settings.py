"""Model settings against what one API family honours: the checks every family shares and the
small pieces its request mapping reuses.

Each family's adapter says what it does with the provider-neutral :class:`ModelSettings` in a
:class:`Honoured` (the settings it refuses and why, the reasoning-effort values its API defines,
its smallest output-token limit); :func:`check` refuses, with :class:`UnsupportedSetting` naming
the setting, whatever it cannot honour or any value outside what the providers document, so
nothing is ever dropped from a request without a word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from providers.base import ModelSettings, UnsupportedSetting

#: The ``tool_choice`` values that name no tool; any other value is one offered tool's name.
CHOICE_KEYWORDS = ("auto", "required", "none")
#: The ``tool_choice`` keywords in the families that call "required" ``any`` (Messages
#: ``tool_choice.type``, Interactions ``ToolChoiceType``; generateContent's
#: ``FunctionCallingConfigMode`` is the same in upper case).
ANY_CHOICES = {"auto": "auto", "required": "any", "none": "none"}
#: The settings that only mean something when tools are offered: each family sends its tool
#: configuration alongside the tools or not at all.
TOOL_SETTINGS = ("tool_choice", "parallel_tool_calls")
#: Sampling ranges every family that takes them documents alike: temperature "between 0 and 2"
#: (OpenAI ``temperature``; Gemini ``GenerationConfig.temperature``, 0.0 to 2.0), top_p a
#: probability mass, 0 to 1.
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.0, 1.0)
#: The reasoning-effort values both OpenAI APIs define (openai SDK ``ReasoningEffort``: Responses
#: ``reasoning.effort``, Chat Completions ``reasoning_effort``).
OPENAI_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
#: Why the OpenAI APIs refuse ``thinking_budget_tokens``: neither has a token budget for
#: reasoning (openai SDK ``ResponseCreateParams``, ``CompletionCreateParams``).
NO_THINKING_BUDGET = "the API budgets reasoning by reasoning_effort, not by tokens"
#: The thinking levels both Gemini APIs define, in the neutral spelling (google-genai
#: ``ThinkingLevel``; Interactions ``thinking_level``).
GEMINI_EFFORTS = ("minimal", "low", "medium", "high", "xhigh")
#: Why the Gemini APIs refuse ``parallel_tool_calls``: neither request has a field for it.
NO_PARALLEL_SWITCH = "the API has no switch for parallel function calls"


@dataclass(frozen=True)
class Honoured:
    """What a family does with the neutral settings.

    ``refused`` maps each setting the family cannot honour to why (the message names the field
    its API lacks); ``efforts`` are the ``reasoning_effort`` values its API defines (empty when
    ``reasoning_effort`` is refused); ``min_output_tokens`` the smallest ``max_output_tokens``
    it accepts (tokens).
    """

    refused: Mapping[str, str]
    efforts: tuple[str, ...] = ()
    min_output_tokens: int = 1


def check(
    settings: ModelSettings, *, family: str, honoured: Honoured, tool_names: Sequence[str]
) -> None:
    """Raise :class:`UnsupportedSetting` for the first setting of ``settings`` that ``family``
    cannot honour (``honoured.refused``), for a value outside its documented range (a
    temperature outside 0 to 2, a top_p outside 0 to 1, a token count below 1 or the family's
    minimum, an effort ``family`` does not define), for a tool setting when no tool is offered
    (``tool_names`` empty), and for a ``tool_choice`` naming no tool in ``tool_names``."""
    for name in settings.as_dict():
        if name in honoured.refused:
            raise UnsupportedSetting(
                name, f"{family} cannot honour {name}: {honoured.refused[name]}"
            )
    _check_counts(settings, honoured)
    _check_sampling(settings)
    if settings.reasoning_effort is not None and settings.reasoning_effort not in honoured.efforts:
        allowed = ", ".join(honoured.efforts)
        raise UnsupportedSetting(
            "reasoning_effort",
            f"{family} takes reasoning_effort {allowed}, not {settings.reasoning_effort!r}",
        )
    _check_tool_settings(settings, tool_names)


def _check_counts(settings: ModelSettings, honoured: Honoured) -> None:
    limit = settings.max_output_tokens
    if limit is not None and limit < honoured.min_output_tokens:
        raise UnsupportedSetting(
            "max_output_tokens",
            f"max_output_tokens must be at least {honoured.min_output_tokens} tokens",
        )
    budget = settings.thinking_budget_tokens
    if budget is not None and budget < 1:
        raise UnsupportedSetting(
            "thinking_budget_tokens", "thinking_budget_tokens must be positive"
        )


def _check_sampling(settings: ModelSettings) -> None:
    for name, value, (low, high) in (
        ("temperature", settings.temperature, TEMPERATURE_RANGE),
        ("top_p", settings.top_p, TOP_P_RANGE),
    ):
        if value is not None and not low <= value <= high:
            raise UnsupportedSetting(name, f"{name} must be between {low:g} and {high:g}")


def _check_tool_settings(settings: ModelSettings, tool_names: Sequence[str]) -> None:
    for name in TOOL_SETTINGS:
        if getattr(settings, name) is not None and not tool_names:
            raise UnsupportedSetting(name, f"{name} needs at least one tool offered")
    choice = settings.tool_choice
    if choice is not None and choice not in CHOICE_KEYWORDS and choice not in tool_names:
        raise UnsupportedSetting(
            "tool_choice",
            f"tool_choice {choice!r} is neither auto, required nor none, nor a tool offered "
            "to this operation",
        )


def named_tool(choice: str | None) -> str | None:
    """The tool name a ``tool_choice`` forces, or ``None`` for a keyword (or no choice)."""
    return None if choice is None or choice in CHOICE_KEYWORDS else choice


def present(**fields: Any) -> dict[str, Any]:
    """``fields`` without the ones that are ``None`` (left to the provider's default)."""
    return {name: value for name, value in fields.items() if value is not None}
