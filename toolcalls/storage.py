"""Make model-supplied text storable in PostgreSQL without losing the rest of it.

PostgreSQL ``text`` and ``jsonb`` cannot hold NUL, and UTF-8 cannot encode lone surrogates
(both are legal in JSON strings); such characters become U+FFFD in what is stored. Arguments
that contain them are rejected before any tool sees them, never altered.
"""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def storable(value: Any) -> Any:
    """``value`` with NUL and lone surrogates replaced by U+FFFD in every string (keys too)."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value
