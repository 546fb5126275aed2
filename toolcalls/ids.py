"""Public, prefixed identifiers shown to people and services (``op_…``, ``tc_…``, ``apr_…``).

Each prefix belongs to Callgate alone: a call's ID is ``tc_…`` because providers name their own
call IDs ``call_…`` (OpenAI) or ``toolu_…`` (Anthropic), and those are kept as
``provider_call_id``. Calls created before this prefix keep their ``call_…`` IDs (IDs are never
rewritten: audit hashes and clients hold them)."""

import secrets


def _new(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def new_operation_id() -> str:
    """``op_`` + 24 hex characters (96 random bits)."""
    return _new("op")


def new_call_id() -> str:
    """``tc_`` + 24 hex characters: Callgate's ID of a call row (not the provider's call ID)."""
    return _new("tc")


def new_approval_id() -> str:
    """``apr_`` + 24 hex characters."""
    return _new("apr")
