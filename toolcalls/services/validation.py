"""The validation chain every call passes before it may run: at dispatch and again at resume.

Order (docs/design.md §5): catalogue (the name must resolve, be offered to this operation and still
be enabled for its tenant) →
strict arguments → JSON Schema → authorization (:mod:`toolcalls.services.authorization`) →
approval policy. Pure reads; no writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolcalls import catalogue
from toolcalls.binding import canonical_json, digest, exact_json_loads
from toolcalls.envelopes import ErrorCode
from toolcalls.models import Operation
from toolcalls.registry import ToolSpec
from toolcalls.schema_errors import ROOT, UNRESOLVABLE, error_text, errors_in_order
from toolcalls.schema_patterns import UnmatchablePattern
from toolcalls.services.authorization import call_authorize
from toolcalls.storage import storable

_MAX_SCHEMA_ERRORS = 5


@dataclass(frozen=True)
class Arguments:
    """A call's arguments after strict normalisation.

    ``value`` is the RFC 8785 canonical form decoded again (so ``30.0`` and ``30`` are the same
    number, as in JSON), ``canonical`` its text and ``sha256`` its digest; when the arguments are
    unusable, ``value`` is ``None`` and ``problem`` says why (a message for the model).
    """

    value: dict[str, Any] | None
    canonical: str = ""
    sha256: str = ""
    problem: str = ""


def arguments_normalize(
    *, arguments: Mapping[str, Any] | None, arguments_error: bool, raw_arguments: str | None
) -> Arguments:
    """Normalise one call's arguments; never raises.

    Unusable: not exactly one JSON object; raw text that is not I-JSON (a member name given
    twice in one object, a number beyond ±(2**53-1): :func:`~toolcalls.binding.exact_json_loads`,
    as RFC 8785 needs); a value JSON cannot represent exactly (integers beyond ±2**53-1,
    non-finite numbers); nesting too deep to process; a NUL or lone surrogate in any string.
    """
    if arguments_error or arguments is None:
        return Arguments(None, problem=_unreadable(raw_arguments))
    try:
        if isinstance(raw_arguments, str) and raw_arguments.strip():
            exact_json_loads(raw_arguments)
        canonical = canonical_json(arguments).decode()
    except (ValueError, RecursionError) as exc:  # CanonicalizationError is a ValueError
        return Arguments(None, problem=f"The arguments cannot be used exactly as sent: {exc}.")
    value = json.loads(canonical)
    if storable(value) != value:
        return Arguments(None, problem="The arguments contain a NUL or an unpaired surrogate.")
    return Arguments(value, canonical=canonical, sha256=digest(value))


def _unreadable(raw_arguments: str | None) -> str:
    """Why arguments the provider's adapter could not read as one JSON object are unusable:
    nested deeper than the reader goes, or not one object (read again only on this path)."""
    try:
        json.loads(raw_arguments or "")
    except RecursionError:
        return "The arguments are nested too deeply to read; send exactly one JSON object."
    except ValueError:
        pass
    return "The arguments must be exactly one JSON object."


@dataclass(frozen=True)
class Verdict:
    """Outcome of the chain for one call.

    Exactly one of: ``error_code`` set (reject with ``error_message``), ``approval_reason`` set
    (park for a human), or neither (ready to run). ``spec`` is set whenever the name resolved.
    """

    spec: ToolSpec | None = None
    error_code: str = ""
    error_message: str = ""
    approval_reason: str | None = None

    @property
    def rejected(self) -> bool:
        return bool(self.error_code)


def call_check(*, operation: Operation, tool_name: str, arguments: Arguments) -> Verdict:
    """Run the chain for one call of ``operation``. Never raises for bad model input."""
    offered = tool_name in operation.tool_names and catalogue.enabled(operation, tool_name)
    spec = catalogue.tool_spec(operation, tool_name) if offered else None
    if spec is None:
        available = [d.name for d in catalogue.declarations(operation)]
        return Verdict(
            error_code=ErrorCode.UNKNOWN_TOOL,
            error_message=f"There is no tool named {tool_name!r}. Available tools: "
            + ", ".join(available),
        )
    if arguments.value is None:
        return Verdict(
            spec=spec, error_code=ErrorCode.INVALID_ARGUMENTS, error_message=arguments.problem
        )
    problems = _schema_problems(spec, arguments.value)
    if problems:
        return Verdict(
            spec=spec,
            error_code=ErrorCode.INVALID_ARGUMENTS,
            error_message="The arguments do not match the tool's schema: " + "; ".join(problems),
        )
    refusal = call_authorize(operation=operation, spec=spec, arguments=arguments.value)
    if refusal is not None:
        return Verdict(spec=spec, error_code=ErrorCode.UNAUTHORIZED, error_message=refusal)
    return Verdict(spec=spec, approval_reason=spec.approval.reason_for(arguments.value))


_UNUSABLE = f"{ROOT}: the tool's schema has a reference that cannot be used; nothing matches"
_UNMATCHABLE = (
    f"{ROOT}: the tool's schema has a pattern that cannot be matched in linear time; nothing "
    "matches it"
)


def _schema_problems(spec: ToolSpec, arguments: Mapping[str, Any]) -> list[str]:
    """Up to :data:`_MAX_SCHEMA_ERRORS` problems of ``arguments`` under the tool's schema. A
    schema stored before references were checked may hold one that does not resolve, or
    references that loop (validating would never end): no arguments can match it (what it
    refers to is never told to the model); or a pattern RE2 cannot match (a backreference):
    no value it applies to matches it. Patterns are matched in linear time
    (:mod:`toolcalls.schema_patterns`)."""
    if not spec.references_usable:
        return [_UNUSABLE]
    try:
        errors = errors_in_order(spec.validator, dict(arguments))
    except RecursionError:
        return [f"{ROOT}: nested too deeply"]
    except UNRESOLVABLE:  # resolved against another base than the check's (a nested $id)
        return [_UNUSABLE]
    except UnmatchablePattern:
        return [_UNMATCHABLE]
    return [error_text(error) for error in errors[:_MAX_SCHEMA_ERRORS]]
