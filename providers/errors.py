"""How provider failures are classified: retryable or permanent, and how long to wait.

Sources: the official SDKs' ``_should_retry`` (openai-python / anthropic-sdk-python
``_base_client.py``: 408, 409, 429 and 5xx, ``retry-after-ms`` then ``retry-after``), OpenAI
"Error codes" (https://platform.openai.com/docs/guides/error-codes: ``insufficient_quota`` is a
spent quota, not a rate), Anthropic "Errors" (https://platform.claude.com/docs/en/api/errors: 529
``overloaded_error``), and Google's "Troubleshooting guide"
(https://ai.google.dev/gemini-api/docs/troubleshooting) with ``google.rpc.RetryInfo``
(https://cloud.google.com/apis/design/errors).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
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


_GOOGLE_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _seconds(text: str, scale: float = 1.0) -> float | None:
    try:
        value = float(text) / scale
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def retry_after_seconds(headers: Mapping[str, str], body: Any = None) -> float | None:
    """Delay in seconds the provider asked for: ``retry-after-ms`` (ms), then ``retry-after``
    (seconds), then a Google ``google.rpc.RetryInfo`` ``retryDelay`` in the body; else ``None``.
    A delay written only in the message text, negative or not finite does not count."""
    if (
        "retry-after-ms" in headers
        and (delay := _seconds(headers["retry-after-ms"], 1000)) is not None
    ):
        return delay
    if "retry-after" in headers and (delay := _seconds(headers["retry-after"])) is not None:
        return delay
    error = body.get("error") if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _GOOGLE_DELAY.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None
