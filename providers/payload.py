"""Defensive reads of provider JSON: adapters are total functions over any payload.

Each helper returns an empty value of the expected type when the payload holds something else,
so a hostile or mutated reply is classified (usually MALFORMED), never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

EMPTY: Mapping[str, Any] = {}


def obj(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else ``{}``."""
    return value if isinstance(value, Mapping) else EMPTY


def items(value: Any) -> list[Mapping[str, Any]]:
    """The JSON objects of ``value`` if it is a JSON array, else ``[]``."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [item for item in value if isinstance(item, Mapping)]
    return []


def text(value: Any) -> str | None:
    """``value`` if it is a string, else ``None``."""
    return value if isinstance(value, str) else None


def integer(value: Any) -> int | None:
    """``value`` if it is a JSON integer (``True`` and ``False`` are not), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: Larger "token counts" are not counts; they would not fit a turn's 32-bit column either.
MAX_COUNT = 2**31 - 1


def count(value: Any) -> int:
    """A token count: integers from 0 to :data:`MAX_COUNT` as they are, anything else 0."""
    valid = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
    return value if valid else 0


def joined(pieces: Sequence[str]) -> str | None:
    """Concatenated text, or ``None`` when there is none."""
    result = "".join(pieces)
    return result or None
