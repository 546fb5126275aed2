"""The validation chain every call passes before it may run: at dispatch and again at resume.

Order (DESIGN.md §5): registry (the name must resolve and be offered to this operation) →
strict arguments → JSON Schema → authorization → approval policy. Pure reads; no writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolcalls import registry
from toolcalls.binding import CanonicalizationError, canonical_json, digest
from toolcalls.envelopes import ErrorCode
from toolcalls.models import Operation
from toolcalls.registry import ToolSpec

_MAX_SCHEMA_ERRORS = 5


@dataclass(frozen=True)
class Verdict:
    """Outcome of the chain for one call.

    Exactly one of: ``error_code`` set (reject with ``error_message``), ``approval_reason`` set
    (park for a human), or neither (ready to run). ``spec`` is set whenever the name resolved;
    ``canonical_arguments`` / ``arguments_sha256`` whenever the arguments canonicalised.
    """

    spec: ToolSpec | None = None
    canonical_arguments: str = ""
    arguments_sha256: str = ""
    error_code: str = ""
    error_message: str = ""
    approval_reason: str | None = None

    @property
    def rejected(self) -> bool:
        return bool(self.error_code)


def call_check(
    *,
    operation: Operation,
    tool_name: str,
    arguments: Mapping[str, Any] | None,
    arguments_error: bool,
) -> Verdict:
    """Run the chain for one call of ``operation``. Never raises for bad model input."""
    spec = registry.get(tool_name) if tool_name in operation.tool_names else None
    if spec is None:
        return Verdict(
            error_code=ErrorCode.UNKNOWN_TOOL,
            error_message=f"There is no tool named {tool_name!r}. Available tools: "
            + ", ".join(operation.tool_names),
        )
    if arguments_error or arguments is None:
        return Verdict(
            spec=spec,
            error_code=ErrorCode.INVALID_ARGUMENTS,
            error_message="The arguments must be exactly one JSON object.",
        )
    try:
        canonical = canonical_json(arguments).decode()
    except CanonicalizationError as exc:
        return Verdict(
            spec=spec, error_code=ErrorCode.INVALID_ARGUMENTS, error_message=f"Arguments: {exc}"
        )
    found = Verdict(spec=spec, canonical_arguments=canonical, arguments_sha256=digest(arguments))
    problems = _schema_problems(spec, arguments)
    if problems:
        return replace(
            found,
            error_code=ErrorCode.INVALID_ARGUMENTS,
            error_message="The arguments do not match the tool's schema: " + "; ".join(problems),
        )
    if not operation.tenant.is_active:
        return replace(
            found,
            error_code=ErrorCode.NOT_AUTHORIZED,
            error_message="This account may not use tools right now.",
        )
    return replace(found, approval_reason=spec.approval.reason_for(arguments))


def _schema_problems(spec: ToolSpec, arguments: Mapping[str, Any]) -> list[str]:
    errors = sorted(spec.validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
    return [
        f"{'/'.join(str(p) for p in error.path) or '(root)'}: {error.message}"
        for error in errors[:_MAX_SCHEMA_ERRORS]
    ]
