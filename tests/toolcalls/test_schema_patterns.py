"""The validator of tools' arguments matches patterns in linear time (RE2) and otherwise is
jsonschema's Draft 2020-12: the same errors, worded the same; patterns are read as ECMA 262
reads them where Python's ``re`` differs (``$``, ``\\d``). A local spec with a pattern RE2
cannot match is refused at registration."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from jsonschema import Draft202012Validator

from tests.toolcalls.test_registry import BASE
from toolcalls import registry
from toolcalls.schema_patterns import LinearValidator, pattern_problems

NESTED = "(a+)+$"
LONG = "a" * 10_000 + "!"

#: Schemas whose every pattern-matching keyword Callgate matches with RE2.
SCHEMAS: list[dict[str, Any]] = [
    {"properties": {"x": {"type": "string", "pattern": "^ORD-[0-9]{3,10}$"}}},
    {"patternProperties": {"^a": {"type": "integer"}, "b$": {"type": "string"}}},
    {"patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False},
    {"patternProperties": {"^a": True}, "additionalProperties": {"type": "string"}},
    {"properties": {"p": {}}, "additionalProperties": False},
    {"properties": {"p": {}}, "patternProperties": {"^a": True}, "unevaluatedProperties": False},
    {
        "allOf": [{"properties": {"p": {}}}],
        "anyOf": [{"patternProperties": {"^q": {}}}],
        "unevaluatedProperties": {"type": "integer"},
    },
    {
        "if": {"properties": {"k": {"const": 1}}, "required": ["k"]},
        "then": {"patternProperties": {"^t": {}}},
        "else": {"properties": {"e": {}}},
        "unevaluatedProperties": False,
    },
    {
        "$defs": {"d": {"patternProperties": {"^r": {}}}},
        "$ref": "#/$defs/d",
        "dependentSchemas": {"k": {"properties": {"z": {}}}},
        "unevaluatedProperties": False,
    },
    {"propertyNames": {"pattern": "^[a-z0-9]+$"}},
    {"properties": {"u": {"type": "string", "pattern": "^[\\u0041-\\u005A]+$"}}},
]
VALUES: list[dict[str, Any]] = [
    {},
    {"x": "ORD-123", "p": 1},
    {"x": "ORD-1"},
    {"a1": 1, "a2": "s", "zz": 3, "b": "q", "yy": "s"},
    {"p": 1, "q": "s", "r": 2, "t": 1, "k": 1, "e": 0, "z": "a", "Z1": 1},
    {"k": 2, "e": 1, "t": 1},
    {"u": "ABC"},
    {"u": "abc"},
]


def _errors(validator: Any, value: Any) -> list[tuple[list[Any], str, list[Any]]]:
    errors = validator.iter_errors(value)
    return sorted((list(e.absolute_path), e.message, list(e.schema_path)) for e in errors)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_errors_are_jsonschemas_own(schema: dict[str, Any]) -> None:
    schema = {"type": "object", **schema}
    for value in VALUES:
        ours = _errors(LinearValidator(schema), value)
        assert ours == _errors(Draft202012Validator(schema), value), value


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"x": {"pattern": NESTED}}},
        {"patternProperties": {NESTED: {}}, "additionalProperties": False},
        {"patternProperties": {NESTED: {}}, "unevaluatedProperties": False},
        {"propertyNames": {"pattern": NESTED}},
    ],
)
def test_a_pattern_that_backtracks_in_python_is_matched_in_linear_time(
    schema: dict[str, Any],
) -> None:
    """Every keyword that matches a pattern: with Python's ``re`` none of these would end."""
    validator = LinearValidator({"type": "object", **schema})
    assert list(validator.iter_errors({"x": LONG, LONG: 1}))


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^a$", "a\n", False),  # ECMA 262's $ is the end of the text; Python's also before \n
        ("^\\d+$", "\u0663", False),  # ECMA 262's \d is ASCII; Python's any decimal digit
        ("^\\u00e9$", "é", True),  # ECMA 262's \uXXXX is RE2's \x{XXXX}
        ("^\\\\u00e9$", "\\u00e9", True),  # an escaped backslash stays one
        ("ORD-[0-9]+", "see ORD-12 here", True),  # searched anywhere, as jsonschema does
    ],
)
def test_patterns_are_read_as_ecma_262_reads_them(pattern: str, text: str, matches: bool) -> None:
    validator = LinearValidator({"type": "string", "pattern": pattern})
    assert validator.is_valid(text) is matches


def test_pattern_problems_name_each_pattern_and_its_place() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {"pattern": "(a)\\1"}, "y": {"pattern": "^ok$"}},
        "patternProperties": {"(?<=a)b": {}},
        "$defs": {"long": {"items": {"pattern": "a{1001}"}}},
    }
    problems = pattern_problems(schema)
    assert [problem.split(" cannot", 1)[0] for problem in problems] == [
        "(root): patternProperties '(?<=a)b'",
        "$defs/long/items: pattern 'a{1001}'",
        "properties/x: pattern '(a)\\\\1'",
    ]
    assert "(RE2 has no backreferences" in problems[2] and problems[2].endswith("\\1")


def test_a_local_spec_with_a_pattern_re2_cannot_match_is_refused() -> None:
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(x)\\1$"}},
        "additionalProperties": False,
    }
    with pytest.raises(ImproperlyConfigured, match=re.escape("properties/code: pattern")):
        registry.register(replace(BASE, parameters=parameters))
    assert registry.get("probe") is None
