"""Signatures of what Callgate POSTs (webhooks, HTTP tools): ``Callgate-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256>`` over ``"<t>.<body>"`` keyed by the
receiver's secret, and the exact body bytes that are signed."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

SIGNATURE_HEADER = "Callgate-Signature"


def sign(*, secret: str, body: bytes, timestamp: int) -> str:
    """The ``Callgate-Signature`` value: ``t=<unix seconds>,v1=<hex HMAC-SHA256>`` over
    ``f"{t}.{body}"`` with the endpoint's secret (``body`` is the exact bytes sent)."""
    return f"t={timestamp},v1={_mac(secret, timestamp, body)}"


def verify_signature(
    *, secret: str, header: str, body: bytes | str, tolerance_s: int = 300, now: float | None = None
) -> bool:
    """True if ``header`` (a ``Callgate-Signature`` value) signs ``body`` with ``secret`` and its
    timestamp is within ``tolerance_s`` seconds of ``now`` (default: the clock). Any ``v1``
    entry may match; the comparison is constant-time."""
    raw = body.encode() if isinstance(body, str) else body
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    expected = _mac(secret, timestamp, raw)
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def payload_body(payload: dict[str, Any]) -> bytes:
    """The bytes POSTed for a payload: compact JSON with sorted keys, so every attempt of a
    delivery sends the same body (``jsonb`` does not keep key order)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
