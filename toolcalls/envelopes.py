"""The model-facing result envelope: the only part of a result ever sent to the model.

``{"status": "ok", "data": {...}}`` or ``{"status": "error", "error": {"code", "message"}}``.
Codes are catalogued in ``docs/error-codes.md``; messages are written for the model and never
carry digests, tenant references or policy revisions.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any


class ErrorCode(enum.StrEnum):
    """Callgate's own codes (tools add their business codes); see ``docs/error-codes.md``."""

    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    UNAUTHORIZED = "UNAUTHORIZED"
    DENIED = "DENIED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    APPROVAL_STALE = "APPROVAL_STALE"
    NO_PROGRESS = "NO_PROGRESS"
    DUPLICATE_CALL = "DUPLICATE_CALL"
    BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    IDEMPOTENCY_KEY_IN_FLIGHT = "IDEMPOTENCY_KEY_IN_FLIGHT"
    TOOL_FAILED = "TOOL_FAILED"
    TIMEOUT = "TIMEOUT"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"
    NOT_APPLIED = "NOT_APPLIED"


def ok(data: Mapping[str, Any]) -> dict[str, Any]:
    """A success envelope around the handler's ``data``."""
    return {"status": "ok", "data": dict(data)}


def error(code: str, message: str) -> dict[str, Any]:
    """An error envelope; ``code`` is an :class:`ErrorCode` or a tool's own business code."""
    return {"status": "error", "error": {"code": str(code), "message": message}}


def is_error(model_result: Mapping[str, Any]) -> bool:
    return model_result.get("status") == "error"
