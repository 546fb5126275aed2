"""Make model-supplied text storable in PostgreSQL without losing the rest of it, and tell
what JSON from people and services cannot be taken as it is.

PostgreSQL ``text`` and ``jsonb`` cannot hold NUL, and UTF-8 cannot encode lone surrogates
(both are legal in JSON strings); such characters become U+FFFD in what is stored. Arguments
that contain them are rejected before any tool sees them, never altered; a request body or an
admin form holding them is refused (:func:`unstorable`, :func:`json_strings`).
"""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"
#: Deepest JSON taken from a person or a service (provider replies nest about a dozen levels):
#: validating and canonicalizing recurse, so a deeper one would end in ``RecursionError``.
MAX_JSON_DEPTH = 64


class TooDeep(ValueError):
    """JSON nested deeper than :data:`MAX_JSON_DEPTH` levels."""


def unstorable(text: str) -> bool:
    """Whether ``text`` holds what PostgreSQL cannot store or compare: NUL, lone surrogates."""
    return _UNSTORABLE.search(text) is not None


def json_strings(value: Any, *, top: str = "body") -> list[tuple[str, str]]:
    """Every string in parsed JSON ``value``, keys included, with its place: the dotted path of
    a value (``metadata.note``, ``tools.1``), that of the object holding a member name (``top``
    for the top level). Raises :class:`TooDeep` past :data:`MAX_JSON_DEPTH` levels. Iterative,
    as the depth is the sender's choice."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            found.append((path or top, item))
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_JSON_DEPTH:
            raise TooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels")
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in pairs:
            if isinstance(key, str):
                found.append((path or top, key))
            stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
    return found


def storable(value: Any) -> Any:
    """``value`` with NUL and lone surrogates replaced by U+FFFD in every string (keys too)."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value
