"""What each model setting takes, as the API document states it (``SettingsRequest``).

The API families decide which values they honour (:mod:`providers.settings` and each adapter's
``honoured``); starting an operation and saving an agent revision check them for the family
(400 ``invalid_request`` naming ``settings.<name>``). The document states the widest bounds any
family accepts as ``minimum``/``maximum``, or every family's values as the ``enum``, and says in
each setting's description which families take less and which refuse it. Everything here is
read from those rules, so the document follows a family's change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from providers.adapter import FamilyAdapter
from providers.anthropic_messages.adapter import MAX_TOKENS, MIN_THINKING_BUDGET
from providers.families import ADAPTERS
from providers.settings import CHOICE_KEYWORDS, TEMPERATURE_RANGE, TOP_P_RANGE, Honoured

#: The family whose thinking budget is bounded by its output tokens, and the one that takes a
#: thinking budget or a level but not both (their adapters' ``check_settings``).
_ANTHROPIC, _GEMINI_GENERATE = "anthropic_messages", "gemini_generate"
#: What the tool settings need (``providers.settings.TOOL_SETTINGS``).
_NEEDS_TOOL = "Needs at least one tool offered."


def settings_schema() -> dict[str, dict[str, Any]]:
    """Each setting's schema keywords beyond its JSON type, by name: ``minimum``, ``maximum``
    or ``enum`` where the families bound it, and a ``description`` naming each family's own
    rule and refusal."""
    families = {
        name: adapter.honoured
        for name, adapter in sorted(ADAPTERS.items())
        if isinstance(adapter, FamilyAdapter)
    }
    schemas = {
        "max_output_tokens": _output_tokens(families),
        "temperature": _range("temperature", TEMPERATURE_RANGE),
        "top_p": _range("top_p", TOP_P_RANGE),
        "reasoning_effort": _efforts(families),
        "thinking_budget_tokens": {
            "minimum": 1,
            "description": f"Tokens the model may think for, at least 1; {_ANTHROPIC}: at least "
            f"{MIN_THINKING_BUDGET} and below max_output_tokens ({MAX_TOKENS} when not set); "
            f"{_GEMINI_GENERATE}: not with reasoning_effort.",
        },
        "tool_choice": {
            "description": f"{', '.join(CHOICE_KEYWORDS)}, or the name of a tool offered to the "
            f"operation. {_NEEDS_TOOL}"
        },
        "parallel_tool_calls": {"description": _NEEDS_TOOL},
    }
    for name, schema in schemas.items():
        schema["description"] += _refused(families, name)
    return schemas


def _output_tokens(families: Mapping[str, Honoured]) -> dict[str, Any]:
    takers = {name: h for name, h in families.items() if "max_output_tokens" not in h.refused}
    widest = min(h.min_output_tokens for h in takers.values())
    own = [
        f"{name}: at least {h.min_output_tokens}"
        for name, h in takers.items()
        if h.min_output_tokens != widest
    ]
    return {
        "minimum": widest,
        "description": f"Output tokens per reply, at least {widest}"
        + (f" ({'; '.join(own)})." if own else "."),
    }


def _range(name: str, bounds: tuple[float, float]) -> dict[str, Any]:
    low, high = bounds
    return {
        "minimum": low,
        "maximum": high,
        "description": f"From {low:g} to {high:g} in every family that takes {name}.",
    }


def _efforts(families: Mapping[str, Honoured]) -> dict[str, Any]:
    """Every family's values as the ``enum`` (in the order of the family that takes the most),
    and the families that take each set."""
    by_values: dict[tuple[str, ...], list[str]] = {}
    for name, honoured in families.items():
        if honoured.efforts:
            by_values.setdefault(honoured.efforts, []).append(name)
    longest_first = sorted(by_values, key=len, reverse=True)
    values = list(dict.fromkeys(value for efforts in longest_first for value in efforts))
    each = "; ".join(f"{', '.join(names)}: {', '.join(e)}" for e, names in by_values.items())
    return {"enum": values, "description": f"What each family takes: {each}."}


def _refused(families: Mapping[str, Honoured], name: str) -> str:
    """ " Refused by <family> (<why>); …." for the families that cannot honour setting
    ``name``; "" when every family does."""
    refusing = [
        f"{family} ({h.refused[name]})" for family, h in families.items() if name in h.refused
    ]
    return f" Refused by {'; '.join(refusing)}." if refusing else ""
