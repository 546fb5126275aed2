"""How provider failures are classified: retryable or permanent, and how long to wait.

Sources: the official SDKs' ``_should_retry`` (openai-python / anthropic-sdk-python
``_base_client.py``: 408, 409, 429 and 5xx, ``retry-after-ms`` then ``retry-after``), RFC 9110
§10.2.3 (``Retry-After``: delta-seconds or an HTTP-date, §5.6.7), OpenAI
"Error codes" (https://platform.openai.com/docs/guides/error-codes: ``insufficient_quota`` is a
spent quota, not a rate), Anthropic "Errors" (https://platform.claude.com/docs/en/api/errors: 529
``overloaded_error``), and Google's "Troubleshooting guide"
(https://ai.google.dev/gemini-api/docs/troubleshooting) with ``google.rpc.RetryInfo``
(https://cloud.google.com/apis/design/errors).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

#: Statuses where sending the same request again may succeed (529 is Anthropic's "overloaded").
RETRYABLE_STATUSES = frozenset({408, 409, 429})
#: Error codes that say "no credit left", not "too fast": never retried even on a 429.
QUOTA_CODES = frozenset({"insufficient_quota", "enforced_spend_limit_reached"})
#: Error codes/types inside a 200 (stream error events, failed responses) that are retryable.
RETRYABLE_CODES = frozenset(
    {
        "server_error",
        "rate_limit_exceeded",
        "overloaded_error",
        "api_error",
        "rate_limit_error",
        "timeout_error",
        "UNAVAILABLE",
        "INTERNAL",
        "RESOURCE_EXHAUSTED",
        "DEADLINE_EXCEEDED",
    }
)


class TransportError(Exception):
    """No reply could be obtained from the provider at all (connection refused, scenario
    exhausted). ``code`` is a stable machine-readable name; ``retryable`` says whether the same
    request may succeed later."""

    def __init__(self, message: str, *, code: str, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


def status_is_retryable(status: int, code: str | None = None) -> bool:
    """Whether an HTTP error status (with the provider's error code, if any) is worth retrying."""
    if code in QUOTA_CODES:
        return False
    return status in RETRYABLE_STATUSES or status >= 500


def code_is_retryable(code: str | None) -> bool:
    """Whether an error reported inside a 200 reply (by code or type) is worth retrying."""
    return code in RETRYABLE_CODES


#: The longest delay read from a reply, in seconds (a day); a longer one reads as a day. Callgate
#: waits at most ``CALLGATE_RETRY_AFTER_MAX_S`` (minutes) and fails the operation beyond it, so a
#: day is "too long" whatever the header said, and no header of any length becomes a number
#: larger than this in a delay, a message or a stored reason.
MAX_RETRY_AFTER_S = 86_400.0
#: A delay as a non-negative decimal number: RFC 9110's delta-seconds (``1*DIGIT``), with the
#: fraction the SDKs also read (``float(retry_after)``); no sign, exponent, ``nan`` or ``inf``.
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
#: A ``google.protobuf.Duration`` in JSON: seconds, then ``s``.
_GOOGLE_DELAY = re.compile(r"([0-9]+(?:\.[0-9]+)?)s")
#: Longer than any of the three HTTP-date forms (RFC 9110 §5.6.7; the longest is 33 characters).
_MAX_DATE_LENGTH = 64


def _seconds(text: str, scale: float = 1.0) -> float | None:
    """``text`` (a decimal number of units, ``scale`` of them a second) in seconds, at most
    :data:`MAX_RETRY_AFTER_S`; ``None`` when it is no such number."""
    value = text.strip()
    if not _NUMBER.fullmatch(value):
        return None
    return min(float(value) / scale, MAX_RETRY_AFTER_S)  # 400 digits are inf: a day too


def _http_date(text: str) -> datetime | None:
    """An HTTP-date in any of its three forms, in UTC (RFC 9110 §5.6.7); ``None`` otherwise."""
    if len(text) > _MAX_DATE_LENGTH:
        return None
    try:
        when = parsedate_to_datetime(text.strip())
    except (ValueError, OverflowError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _until(text: str, headers: Mapping[str, str]) -> float | None:
    """Seconds from the reply's ``date`` to the HTTP-date ``text``, 0 when it has passed and
    at most :data:`MAX_RETRY_AFTER_S`. Counted on the provider's own clock, as it sent both,
    so the adapter reads no clock of its own; ``None`` without a readable ``date``."""
    when, sent = _http_date(text), _http_date(headers.get("date", ""))
    if when is None or sent is None:
        return None
    return min(max((when - sent).total_seconds(), 0.0), MAX_RETRY_AFTER_S)


def retry_after_seconds(headers: Mapping[str, str], body: Any = None) -> float | None:
    """Delay in seconds the provider asked for: ``retry-after-ms`` (ms), then ``retry-after``
    (delta-seconds, or an HTTP-date counted from the reply's ``date``), then a Google
    ``google.rpc.RetryInfo`` ``retryDelay`` in the body; else ``None``. A delay written only in
    the message text, or in any other form (negative, ``nan``, an exponent), does not count;
    one longer than :data:`MAX_RETRY_AFTER_S` reads as that."""
    if "retry-after-ms" in headers and (
        (delay := _seconds(headers["retry-after-ms"], 1000)) is not None
    ):
        return delay
    if "retry-after" in headers:
        value = headers["retry-after"]
        delay = _seconds(value)
        if delay is None:
            delay = _until(value, headers)
        if delay is not None:
            return delay
    error = body.get("error") if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _GOOGLE_DELAY.fullmatch(str(detail.get("retryDelay", "")).strip())
            if match:
                return _seconds(match.group(1))
    return None
