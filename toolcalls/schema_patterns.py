"""A tool schema's regular expressions, matched in linear time.

JSON Schema's ``pattern`` and ``patternProperties`` are ECMA 262 regular expressions; jsonschema
matches them with Python's ``re``, which backtracks: ``(a+)+$`` against 30 ``a`` and a ``!``
takes minutes, while the step that validates a call holds its operation's lock.
:data:`LinearValidator` is Draft 2020-12 as jsonschema validates it (the same errors, worded the
same), except that every keyword matching a schema's pattern (``pattern``, ``patternProperties``,
and ``additionalProperties`` / ``unevaluatedProperties``, which ask which keys
``patternProperties`` matched) matches it with RE2 (``google-re2``), whose time grows linearly
with the text and the pattern.

RE2 cannot match what needs backtracking (backreferences such as ``(a)\\1``, lookaround such as
``(?=a)``) nor repeat more than 1000 times (``a{1001}``): :func:`pattern_problems` names such
patterns of a schema. Otherwise RE2 reads a pattern as ECMA 262 does where it matters for JSON
Schema (RE2 syntax: https://github.com/google/re2/wiki/Syntax): ``\\d``, ``\\w`` and ``\\b`` are
ASCII, ``$`` matches only at the end of the text (Python's also before a final newline), ``.``
matches anything but a newline; ECMA 262's ``\\uXXXX`` is read as RE2's ``\\x{XXXX}``. A
pattern is searched for anywhere in the text, as jsonschema does (``re.search``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import re2
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import extend

from toolcalls.schema_errors import place_text

#: RE2's defaults (UTF-8, case-sensitive, ``.`` not matching a newline), without logging to
#: standard error each pattern it cannot compile.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
#: ECMA 262's ``\uXXXX`` (group 1: the hex digits), or any other escape, kept as it is (so
#: ``\\u0041`` stays an escaped backslash before ``u0041``).
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\.", re.DOTALL)
#: Draft 2020-12's keywords whose value is a schema, a list of schemas, or an object whose
#: values are schemas (as ``referencing.jsonschema.DRAFT202012`` finds subschemas).
_IN_VALUE = (
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_IN_ITEMS = ("allOf", "anyOf", "oneOf", "prefixItems")
_IN_VALUES = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")
#: A schema and its place: the keys and list indexes from the root schema down to it.
_Placed = tuple[list[str | int], Any]


class UnmatchablePattern(Exception):
    """A schema's pattern that RE2 cannot compile; the message says why (RE2's words)."""


@functools.lru_cache(maxsize=1024)
def _regexp(pattern: str) -> Any:
    """``pattern`` (ECMA 262) compiled by RE2; raises :class:`UnmatchablePattern` for one RE2
    cannot compile (or encode: a lone surrogate)."""
    try:
        return re2.compile(_ESCAPE.sub(_re2_escape, pattern), _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else ""
        raise UnmatchablePattern(
            reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        ) from exc
    except UnicodeEncodeError as exc:
        raise UnmatchablePattern(exc.reason) from exc


def _re2_escape(escape: re.Match[str]) -> str:
    """An escape of ECMA 262 as RE2 spells it: ``\\uXXXX`` as ``\\x{XXXX}``, others as they
    are."""
    digits = escape.group(1)
    return f"\\x{{{digits}}}" if digits else escape.group(0)


def _search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (``re.search`` as jsonschema asks)."""
    return _regexp(pattern).search(text) is not None


def pattern_problems(schema: Mapping[str, Any]) -> list[str]:
    """Why patterns of ``schema`` (valid Draft 2020-12) cannot be used, each naming the keyword,
    the pattern and the place of its schema (``properties/code``, or ``(root)``): those RE2
    cannot compile. ``[]`` when every one can be matched in linear time. Patterns are found in
    every subschema of ``schema`` (``$defs`` included), without recursion; not under a keyword
    Draft 2020-12 does not read as a schema, which only a reference could reach (validation
    raises :class:`UnmatchablePattern` when it meets such a pattern)."""
    problems = []
    for path, keyword, pattern in _patterns(schema):
        try:
            _regexp(pattern)
        except UnmatchablePattern as exc:
            problems.append(
                place_text(
                    path,
                    f"{keyword} {pattern!r} cannot be matched in linear time (RE2 has no "
                    f"backreferences, no lookaround, no repeat count above 1000): {exc}",
                )
            )
    return problems


def _patterns(schema: Mapping[str, Any]) -> Iterator[tuple[list[str | int], str, str]]:
    """(place, keyword, pattern) of every pattern of ``schema``'s subschemas, depth first
    (each schema's own before those within it)."""
    stack: list[_Placed] = [([], schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        if isinstance(pattern := node.get("pattern"), str):
            yield path, "pattern", pattern
        if isinstance(patterns := node.get("patternProperties"), Mapping):
            yield from ((path, "patternProperties", key) for key in patterns)
        stack += reversed(list(_subschemas(path, node)))


def _subschemas(path: list[str | int], node: Mapping[str, Any]) -> Iterator[_Placed]:
    """The schemas directly within ``node`` (at ``path``), with their places."""
    for keyword in _IN_VALUE:
        if keyword in node:
            yield [*path, keyword], node[keyword]
    for keyword in _IN_ITEMS:
        if isinstance(items := node.get(keyword), list):
            yield from (([*path, keyword, index], item) for index, item in enumerate(items))
    for keyword in _IN_VALUES:
        if isinstance(values := node.get(keyword), Mapping):
            yield from (([*path, keyword, key], value) for key, value in values.items())


# The keywords below are jsonschema's (``jsonschema/_keywords.py``, ``_utils.py``: the same
# logic and messages), with RE2's search in place of ``re.search``.


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = {key for key in instance if not _named(key, schema)}
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras and "patternProperties" in schema:
        verb = "does" if len(extras) == 1 else "do"
        joined = ", ".join(repr(each) for each in sorted(extras))
        patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
        yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
    elif not additional and extras:
        listed = _listed(sorted(extras, key=str))
        yield ValidationError(f"Additional properties are not allowed ({listed} unexpected)")


def _named(key: str, schema: Mapping[str, Any]) -> bool:
    """Whether ``schema``'s ``properties`` or ``patternProperties`` name ``key``."""
    return key in schema.get("properties", {}) or _matched(key, schema)


def _matched(key: str, schema: Mapping[str, Any]) -> bool:
    """Whether a pattern of ``schema``'s ``patternProperties`` matches ``key``."""
    return any(_search(pattern, key) for pattern in schema.get("patternProperties", {}))


def _listed(keys: list[Any]) -> str:
    """``'a', 'b' were`` / ``'a' was``: keys as jsonschema's messages list them."""
    return ", ".join(repr(key) for key in keys) + (" was" if len(keys) == 1 else " were")


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    failing = [
        key
        for key in instance
        if key not in evaluated
        for _ in validator.descend(instance[key], unevaluated, path=key, schema_path=key)
    ]
    if failing and unevaluated is False:
        listed = _listed(sorted(failing, key=str))
        yield ValidationError(f"Unevaluated properties are not allowed ({listed} unexpected)")
    elif failing:
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({_listed(failing)} unevaluated and invalid)"
        )


def _evaluated_keys(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The keys of ``instance`` that ``schema`` evaluates, as ``unevaluatedProperties`` counts
    them: by ``properties``, ``patternProperties``, ``additionalProperties`` and
    ``unevaluatedProperties`` here, or in what its references, ``dependentSchemas`` and
    in-place applicators that apply lead to."""
    if validator.is_type(schema, "boolean"):
        return set()
    keys = _evaluated_by_references(validator, instance, schema)
    keys |= instance.keys() & schema.get("properties", {}).keys()
    keys |= {key for key in instance if _matched(key, schema)}
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys |= {key for key, value in instance.items() if _valid(validator, value, subschema)}
    return keys | _evaluated_in_place(validator, instance, schema)


def _evaluated_by_references(
    validator: Any, instance: Mapping[str, Any], schema: Mapping[str, Any]
) -> set[str]:
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        if (reference := schema.get(keyword)) is not None:
            resolved = validator._resolver.lookup(reference)
            there = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            keys |= _evaluated_keys(there, instance, resolved.contents)
    return keys


def _evaluated_in_place(
    validator: Any, instance: Mapping[str, Any], schema: Mapping[str, Any]
) -> set[str]:
    applying = [
        subschema
        for name, subschema in schema.get("dependentSchemas", {}).items()
        if name in instance
    ]
    applying += [
        subschema
        for keyword in ("allOf", "oneOf", "anyOf")
        for subschema in schema.get(keyword, [])
        if _valid(validator, instance, subschema)
    ]
    if "if" in schema and validator.evolve(schema=schema["if"]).is_valid(instance):
        applying += [schema["if"], *([schema["then"]] if "then" in schema else [])]
    elif "if" in schema and "else" in schema:
        applying.append(schema["else"])
    return set().union(*(_evaluated_keys(validator, instance, each) for each in applying))


def _valid(validator: Any, value: Any, subschema: Any) -> bool:
    """Whether ``value`` is valid under ``subschema``, a schema within ``validator``'s."""
    return next(validator.descend(value, subschema), None) is None


#: Draft 2020-12 with every pattern matched by RE2 (see the module's docstring).
LinearValidator = extend(
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "unevaluatedProperties": _unevaluated_properties,
    },
)
