"""Console template filters."""

from __future__ import annotations

import json
from typing import Any

from django import template

from toolcalls.reasons import reason_code

register = template.Library()


@register.filter
def cents(value: Any) -> str:
    """An amount in cents as ``123.45``; anything else unchanged."""
    if isinstance(value, int) and not isinstance(value, bool):
        sign = "-" if value < 0 else ""
        return f"{sign}{abs(value) // 100:,}.{abs(value) % 100:02d}"
    return str(value)


@register.filter
def as_json(value: Any) -> str:
    """Compact JSON for showing a value in a cell."""
    return json.dumps(value, ensure_ascii=False)


@register.filter
def micros_usd(value: Any) -> str:
    """Micro-USD as dollars with six decimals."""
    return f"{int(value) / 1_000_000:.6f}" if isinstance(value, int) else str(value)


@register.filter
def field_label(name: str) -> str:
    """``already_refunded_cents`` → ``Already refunded`` (amounts are shown formatted)."""
    words = name.removesuffix("_cents").replace("_", " ")
    return words[:1].upper() + words[1:]


@register.filter
def shorten(value: Any, length: int = 24) -> str:
    """Long values (digests, keys) cut to ``length`` characters with an ellipsis; the full
    value stays in the element's title."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= length else text[: length - 1] + "…"


@register.filter
def code_of_reason(reason: str) -> str:
    """The reason code an operation's ``terminal_reason`` starts with ("" without one)."""
    return reason_code(reason or "") or ""
