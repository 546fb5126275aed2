"""JSON a person types into a form (the admin, the console's approval edits), read by the rule
the API reads a body with: I-JSON (:func:`~toolcalls.binding.exact_json_loads`: a member name
typed twice is refused, never read as its last value; a number no double holds exactly is
refused), nested at most :data:`~toolcalls.storage.MAX_JSON_DEPTH` levels, no text the database
cannot store (:func:`~toolcalls.storage.unstorable`). Refusals are form errors with a message
for the person typing, never an exception that would end in a 500.
"""

from __future__ import annotations

from typing import Any

from django import forms

from toolcalls.binding import InexactJson, exact_json_loads
from toolcalls.storage import MAX_JSON_DEPTH, TooDeep, json_strings, unstorable

TOO_DEEP = f"Nested deeper than {MAX_JSON_DEPTH} levels."
UNSTORABLE = "Text may not contain NUL characters or unpaired surrogates."


def typed_json(text: str) -> Any:
    """The JSON document ``text`` holds. Raises ``forms.ValidationError`` (one message) when
    it is not JSON, not I-JSON, nested too deeply, or holds NUL or an unpaired surrogate."""
    try:
        value = exact_json_loads(text)
    except RecursionError:  # the parser's own limit, far above ours
        raise forms.ValidationError(TOO_DEEP) from None
    except InexactJson as exc:
        raise forms.ValidationError(f"Not usable exactly as typed: {exc}.") from None
    except ValueError as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc}") from None
    try:
        strings = json_strings(value)
    except TooDeep:
        raise forms.ValidationError(TOO_DEEP) from None
    if any(unstorable(string) for _place, string in strings):
        raise forms.ValidationError(UNSTORABLE)
    return value
