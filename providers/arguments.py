"""Strict decoding of argument text: exactly one JSON object, never repaired or coerced.

Providers that send arguments as text (OpenAI's ``arguments``, streamed deltas everywhere)
promise a JSON object; anything else is the model's mistake, reported as an argument error for
the dispatcher to reject, never guessed at.
"""

from __future__ import annotations

import json
from typing import Any


def decode_arguments(raw: str | None) -> tuple[dict[str, Any] | None, bool]:
    """Decode a raw argument string.

    Returns ``(arguments, error)``: an empty, all-whitespace or missing string is a call without
    parameters (``({}, False)``); text that is not exactly one JSON object (invalid JSON, two
    documents back to back, a string or array) is ``(None, True)``.
    """
    if raw is None or not raw.strip():
        return {}, False
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        return None, True
    if not isinstance(value, dict):
        return None, True
    return value, False


def decode_argument_text(value: Any) -> tuple[dict[str, Any] | None, bool]:
    """:func:`decode_arguments` for a field that should hold argument text: a value that is not
    a string at all (a number, an object) is ``(None, True)``; a missing one is ``({}, False)``."""
    if value is not None and not isinstance(value, str):
        return None, True
    return decode_arguments(value)


def is_cut_off(raw: str | None) -> bool:
    """Whether argument text stops mid-document: inside a string, or with ``{``/``[`` still open.

    A reply holding such a call is TRUNCATED whatever finish reason the server claims.
    """
    if not raw:
        return False
    depth = 0
    in_string = False
    escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return in_string or depth > 0
