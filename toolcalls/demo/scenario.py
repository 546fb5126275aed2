"""Scenario files: a user's request plus the model's replies in wire format (docs/scenarios.md).

A scenario is data: ``family``, ``model``, ``input`` and ``replies`` (each written like a case in
``tests/fixtures/README.md``: ``kind``, ``http_status``, optional ``headers``, and ``body`` or
``events``), and optionally ``instructions``, earlier ``messages``, model ``settings`` and
``budgets``, as the API takes them. Loading validates the shape, checks the replies as the API
checks its own (:mod:`toolcalls.services.scripts`) and stores them as a ``ReplayScript``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from providers.families import ADAPTERS
from providers.replay import REPLY_SCHEMA
from toolcalls.binding import InexactJson, exact_json_loads
from toolcalls.errors import CallgateError
from toolcalls.models import ReplayScript
from toolcalls.schema_errors import error_text, errors_in_order
from toolcalls.services.scripts import ScriptError, replies_check
from toolcalls.storage import storable
from toolcalls.text import visible

BUNDLED_DIR = Path(__file__).resolve().parent / "scenarios"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["family", "model", "input", "replies"],
    "properties": {
        "description": {"type": "string"},
        "family": {"type": "string", "enum": sorted(ADAPTERS)},
        "model": {"type": "string", "minLength": 1, "maxLength": 100},
        "input": {"type": "string", "minLength": 1, "maxLength": 100_000},
        "instructions": {"type": "string", "maxLength": 100_000},
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["role", "text"],
                "properties": {
                    "role": {"enum": ["user", "assistant"]},
                    "text": {"type": "string", "maxLength": 100_000},
                },
                "additionalProperties": False,
            },
        },
        "settings": {"type": "object"},
        "budgets": {"type": "object", "additionalProperties": {"type": "number"}},
        "replies": {
            "type": "array",
            "minItems": 1,
            "items": REPLY_SCHEMA,
        },
    },
}
_VALIDATOR = Draft202012Validator(SCHEMA)


class ScenarioError(CallgateError):
    """The file is missing, not JSON, or not a valid scenario; the message says where."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_scenario", message)


def scenario_read(path: Path) -> dict[str, Any]:
    """Parse (as I-JSON: :func:`~toolcalls.binding.exact_json_loads`) and validate a scenario
    file; raises :class:`ScenarioError`."""
    try:
        data = exact_json_loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except InexactJson as exc:
        raise ScenarioError(f"{path}: not usable exactly as written: {exc}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise ScenarioError(f"{path}: not readable JSON ({type(exc).__name__}: {exc})") from None
    errors = errors_in_order(_VALIDATOR, data)
    if errors:
        raise ScenarioError(f"{path}: {error_text(errors[0])}")
    if storable(data) != data:
        raise ScenarioError(f"{path}: holds a NUL or an unpaired surrogate, which cannot be stored")
    if not visible(data["input"]):
        message = "input: may not be blank (white space and format characters alone)"
        raise ScenarioError(f"{path}: {message}")
    try:
        replies_check(replies=data["replies"], family=data["family"])
    except ScriptError as exc:
        raise ScenarioError(f"{path}: {exc.message}") from None
    return data


def scenario_store(*, name: str, scenario: dict[str, Any]) -> ReplayScript:
    """Save the scenario's replies as a :class:`ReplayScript` for the replay transport."""
    return ReplayScript.objects.create(
        name=name, family=scenario["family"], model=scenario["model"], replies=scenario["replies"]
    )


def scenario_tools_renamed(scenario: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``scenario`` whose model calls tools by other names (``names``: old → new).
    Every family's wire format names a called tool in a ``name`` member, so each ``name``
    whose value is a key of ``names`` is replaced."""

    def renamed(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: names.get(item, item)
                if key == "name" and isinstance(item, str)
                else renamed(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [renamed(item) for item in value]
        return value

    return {**scenario, "replies": renamed(scenario["replies"])}


def bundled_path(*, family: str, name: str) -> Path:
    """Path of a bundled scenario (``toolcalls/demo/scenarios/<family>/<name>.json``)."""
    return BUNDLED_DIR / family / f"{name}.json"
