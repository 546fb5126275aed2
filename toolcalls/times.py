"""How Callgate writes a moment as text, wherever it leaves the process (API, webhooks, audit
details): the one form docs/api.md promises."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(value: datetime) -> str:
    """``value`` (aware) in UTC as RFC 3339 ending in ``Z``: ``2025-11-30T09:15:02.123456Z``
    (as DRF writes date-times in responses)."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
