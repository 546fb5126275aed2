"""Canonical JSON, digests and result binding (DESIGN.md §7; seeds 000 "Call correlation is not
result binding").

Canonical form is RFC 8785 (JSON Canonicalization Scheme) via the ``rfc8785`` package; every
digest is SHA-256 over it, as 64 lower-case hex characters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import rfc8785

CanonicalizationError = rfc8785.CanonicalizationError


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of ``value``; raises :data:`CanonicalizationError` for values JSON cannot
    represent exactly (non-finite floats, integers beyond ±2**53-1)."""
    return rfc8785.dumps(value)


def digest(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def request_digest(
    *, tool: str, schema_version: str, arguments: Any, call_id: str, response_id: str
) -> str:
    """``request_sha256``: tool, schema version, canonical arguments, call ID, response ID."""
    return digest(
        {
            "tool": tool,
            "schema_version": schema_version,
            "arguments": arguments,
            "call_id": call_id,
            "response_id": response_id,
        }
    )


@dataclass(frozen=True)
class Binding:
    """Everything one result is bound to. Built from trusted context only (rows written by
    Callgate, the registry, settings), never from model output alone.

    ``tool_revisions`` holds the tool's ``input``/``output``/``effect``/``handler`` revisions plus
    its ``schema_version``.
    """

    provider: str
    family: str
    response_id: str
    call_id: str
    operation_id: str
    idempotency_key: str
    adapter_revision: str
    tenant_ref: str
    subject_ref: str
    tool_name: str
    tool_revisions: Mapping[str, str]
    policy_revision: str
    request_sha256: str
    result_sha256: str

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (``tool_revisions`` as a plain dict): the fields are strings, so
        a shallow copy is the whole of it (``dataclasses.asdict`` deep-copies each one)."""
        data = {field.name: getattr(self, field.name) for field in fields(self)}
        data["tool_revisions"] = dict(self.tool_revisions)
        return data

    def sha256(self) -> str:
        """``binding_sha256`` over every field."""
        return digest(self.as_dict())
