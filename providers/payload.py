"""Defensive reads of provider JSON: adapters are total functions over any payload.

Each helper returns an empty value of the expected type when the payload holds something else,
so a hostile or mutated reply is classified (usually MALFORMED), never a crash.
"""

from __future__ import annotations

import math
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


#: The largest token count kept (a turn's 32-bit column): a larger claim counts as this many.
MAX_COUNT = 2**31 - 1


def count(value: Any) -> int:
    """A token count, never fewer tokens than the provider claims, so a token or cost budget is
    never passed unseen: a whole number from 0 up as it is, at most :data:`MAX_COUNT` (a larger
    one, infinity included, counts as that many); a fraction rounded up; anything else (a
    negative number, NaN, not a number) 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    if value < 0:
        return 0
    return MAX_COUNT if value >= MAX_COUNT else math.ceil(value)


def joined(pieces: Sequence[str]) -> str | None:
    """Concatenated text, or ``None`` when there is none."""
    result = "".join(pieces)
    return result or None
