"""Public, prefixed identifiers shown to people and services (``op_…``, ``call_…``, ``apr_…``)."""

import secrets


def _new(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def new_operation_id() -> str:
    """``op_`` + 24 hex characters (96 random bits)."""
    return _new("op")


def new_call_id() -> str:
    """``call_`` + 24 hex characters: Callgate's ID of a call row (not the provider's call ID)."""
    return _new("call")


def new_approval_id() -> str:
    """``apr_`` + 24 hex characters."""
    return _new("apr")
