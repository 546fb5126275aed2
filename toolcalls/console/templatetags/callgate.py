"""Console template filters."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django import template
from django.forms import BoundField
from django.utils import timezone
from django.utils.html import format_html

from toolcalls.actors import Actor
from toolcalls.reasons import reason_code
from toolcalls.text import shown_html

register = template.Library()


@register.filter
def cents(value: Any) -> str:
    """An amount in cents as ``123.45``; anything else unchanged."""
    if isinstance(value, int) and not isinstance(value, bool):
        sign = "-" if value < 0 else ""
        return f"{sign}{abs(value) // 100:,}.{abs(value) % 100:02d}"
    return str(value)


#: Text from users, callers, models or tools, escaped, with its bidirectional controls shown.
register.filter("visible", shown_html, is_safe=True)


@register.filter
def as_json(value: Any) -> str:
    """Compact JSON for showing a value in a cell."""
    return json.dumps(value, ensure_ascii=False)


@register.filter
def micros_usd(value: Any) -> str:
    """Micro-USD as dollars to a hundredth of a cent (a turn costs fractions of a cent)."""
    return f"{int(value) / 1_000_000:.4f}" if isinstance(value, int) else str(value)


@register.filter
def field_label(name: str) -> str:
    """``already_refunded_cents`` → ``Already refunded`` (amounts are shown formatted)."""
    words = name.removesuffix("_cents").replace("_", " ")
    return words[:1].upper() + words[1:]


@register.filter
def page_query(filters: dict[str, str], cursor: str | None) -> str:
    """The query string (``?…``) of a keyset-paged list's page: its ``filters`` (query-string
    parameters), then ``after=cursor``; none for the first page (``cursor`` empty)."""
    return f"?{urlencode({**filters, 'after': cursor} if cursor else filters)}"


@register.filter
def shorten(value: Any, length: int = 24) -> str:
    """Long values (digests, keys) cut to ``length`` characters with an ellipsis; the full
    value stays in the element's title."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= length else text[: length - 1] + "…"


#: How :func:`~toolcalls.selectors.principal_names` begins a person's name.
_PERSON = Actor("user", "").audit_name


@register.filter
def principal(name: str | None) -> str:
    """A user as :func:`~toolcalls.selectors.principal_names` names them, for people to read: a
    person by username, an API key's service as the API and the audit trail name it
    (``service:<key name>``, never its service user's internal username)."""
    return (name or "").removeprefix(_PERSON)


@register.filter
def code_of_reason(reason: str) -> str:
    """The reason code an operation's ``terminal_reason`` starts with ("" without one)."""
    return reason_code(reason or "") or ""


@register.filter
def reason_text(reason: str) -> str:
    """An operation's ``terminal_reason`` without the code it starts with (shown on its own):
    ``"CANCELLED: customer withdrew"`` → ``"customer withdrew"``."""
    code = reason_code(reason or "")
    if code is None:
        return reason or ""
    return reason[len(code) :].removeprefix(":").strip()


def _money(value: Any, currency: str) -> str:
    return f"{cents(value)} {currency}".strip()


@register.filter
def summary_items(summary: Any, currency: str = "") -> list[tuple[str, str]]:
    """A tool's summary (``[field, value]`` pairs, in the tool's order), dry run, arguments or
    result (field → value: identifiers first, then amounts, then the rest, as JSON objects
    stored by PostgreSQL lose their order) as (label, text) pairs for people. Amounts in cents
    (``*_cents``) are shown in the ``currency`` field's currency, which is not listed itself,
    or else in ``currency``."""
    pairs = _pairs(summary)
    currency = str(dict(pairs).get("currency", currency))
    return [
        (field_label(name), _money(value, currency) if name.endswith("_cents") else str(value))
        for name, value in pairs
        if name != "currency"
    ]


def _rank(name: str) -> int:
    return 0 if name.endswith("_id") else 1 if name.endswith("_cents") else 2


def _pairs(summary: Any) -> list[tuple[str, Any]]:
    if isinstance(summary, dict):
        return sorted(summary.items(), key=lambda item: (_rank(item[0]), item[0]))
    if isinstance(summary, list):
        return [(str(p[0]), p[1]) for p in summary if isinstance(p, list) and len(p) == 2]
    return []


@register.filter
def amount(approval: Any) -> str:
    """An approval's amount with its currency when its summary names one ("—" without)."""
    if approval.amount_cents is None:
        return "—"
    return _money(approval.amount_cents, str(dict(_pairs(approval.summary)).get("currency", "")))


@register.filter
def when(value: datetime | None) -> str:
    """A date and time in the viewer's time zone, as ``<time>`` with UTC in its title."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.isoformat(),
        f"{utc:%Y-%m-%d %H:%M:%S}",
        f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}",
    )


@register.filter
def autofocus(field: BoundField) -> str:
    """The field's widget with ``autofocus``: the page's form takes the keyboard at once."""
    return field.as_widget(attrs={"autofocus": True})


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` ("" when absent)."""
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


@register.filter
def detail_items(details: Any) -> list[tuple[str, str, bool]]:
    """An audit event's details as (name, text, nested) rows for people: scalars as text in
    full, nested values as indented JSON (shown folded)."""
    if not isinstance(details, dict):
        return []
    return [
        (
            name.replace("_", " "),
            json.dumps(value, indent=2, ensure_ascii=False)
            if isinstance(value, dict | list)
            else str(value),
            isinstance(value, dict | list),
        )
        for name, value in details.items()
        if value or value == 0
    ]
