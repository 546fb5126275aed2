"""The rules a remote tool is reviewed and named by; pure functions, no I/O.

- Model-facing name: ``<server name>__<served name>`` (server names are ``[a-z][a-z0-9-]{0,29}``,
  so the first ``__`` separates them); it must satisfy every provider's tool-name rule
  (``providers.adapter.PLAIN_TOOL_NAME``) and name no tool deployed with Callgate.
- Revision: SHA-256 of the RFC 8785 canonical JSON of the served name, description, input
  schema and annotations; any change to them is a new revision that needs enabling. A revision
  canonical JSON cannot hold (a ``maximum`` of 1e30) is recorded with that problem and cannot
  be enabled; so is a name the listing gives to more than one tool (its revision counts them,
  so it matches no pin: a call by that name could reach any of them).
- Schema: the served input schema must be valid JSON Schema (Draft 2020-12) for an object whose
  references (``$ref``, ``$dynamicRef``) resolve within it (``#…``: nothing is retrieved from
  elsewhere) and whose patterns RE2 can match (no backreferences or lookaround:
  :mod:`toolcalls.schema_patterns`, which matches them in linear time); Callgate validates
  arguments against it with unknown fields rejected (``additionalProperties: false`` at the top
  level, whatever the server says).
- Approval condition: ``<argument> <op> <integer>`` with ``op`` one of ``> >= < <= == !=``,
  on a top-level argument the schema declares.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from providers.adapter import PLAIN_TOOL_NAME
from toolcalls.binding import CanonicalizationError, canonical_json, digest
from toolcalls.remote.clients import ServedTool
from toolcalls.schema_errors import reference_problems
from toolcalls.schema_patterns import pattern_problems

SERVER_NAME = re.compile(r"[a-z][a-z0-9-]{0,29}")
NAME_SEPARATOR = "__"
#: Trusted context fields an idempotency key may be formed from (never model output).
KEY_CONTEXT_FIELDS = ("tenant_ref", "subject_ref", "operation_id")
_CONDITION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|==|!=|>|<)\s*(-?[0-9]{1,15})\s*")
OPERATORS: Mapping[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


def model_name(server_name: str, remote_name: str) -> str:
    """The name the model calls a served tool by."""
    return f"{server_name}{NAME_SEPARATOR}{remote_name}"


def served_sha256(served: ServedTool) -> str:
    """The served revision's digest (hex SHA-256); ``""`` for a revision canonical JSON cannot
    hold (a number beyond ±(2**53-1) in its schema: :func:`served_problem` says so, and it
    cannot be enabled)."""
    try:
        return digest(_revision(served))
    except CanonicalizationError:
        return ""


def _revision(served: ServedTool) -> dict[str, Any]:
    revision = {
        "name": served.name,
        "description": served.description,
        "input_schema": served.input_schema,
        "annotations": served.annotations,
    }
    return revision if served.listed == 1 else {**revision, "listed": served.listed}


def served_problem(served: ServedTool, *, server_name: str) -> str:
    """Why the served revision cannot be enabled, or ``""``: its name
    (:func:`served_name_problem`), then its revision and schema (:func:`served_schema_problem`)."""
    return served_name_problem(served, server_name=server_name) or served_schema_problem(served)


def served_name_problem(served: ServedTool, *, server_name: str) -> str:
    """Why the served tool's name cannot be called (none, listed twice, not a name a model may
    call once prefixed with ``server_name``), or ``""``."""
    name = model_name(server_name, served.name)
    if not served.name:
        return "the tool has no name: a served tool needs one"
    if served.listed > 1:
        return (
            f"the server lists {served.listed} tools named {served.name!r}: a call by that name "
            "could reach any of them"
        )
    if not PLAIN_TOOL_NAME.fullmatch(name):
        return f"{name!r} is not a name a model may call: [A-Za-z0-9_-], at most 64 characters"
    return ""


def served_schema_problem(served: ServedTool) -> str:
    """Why the served revision cannot be pinned, or its input schema cannot be used, or ``""``."""
    try:
        canonical_json(_revision(served))
    except CanonicalizationError as exc:
        return f"the served tool cannot be pinned by its canonical JSON: {exc}"
    schema = served.input_schema
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as exc:
        return f"the input schema is not valid JSON Schema: {exc.message}"
    if schema.get("type") != "object":
        return "the input schema must describe an object"
    if problems := reference_problems(schema) + pattern_problems(schema):
        return "the input schema cannot be used: " + "; ".join(problems)
    return ""


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema Callgate validates arguments with: the served one, unknown fields rejected."""
    return {**schema, "additionalProperties": False}


def condition_parse(text: str) -> tuple[str, str, int]:
    """``"amount_cents > 2500"`` → ``("amount_cents", ">", 2500)``; ``ValueError`` otherwise."""
    match = _CONDITION.fullmatch(text)
    if match is None:
        raise ValueError(
            "write the condition as '<argument> <op> <integer>' (an integer of at most 15 "
            "digits), op one of " + " ".join(OPERATORS)
        )
    return match.group(1), match.group(2), int(match.group(3))


def condition_reason(text: str, arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` need approval under the condition ``text``, or ``None``. A value that
    is not a number needs approval: the condition cannot clear it."""
    field, op, limit = condition_parse(text)
    value = arguments.get(field)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return f"{field} is not a number, so the condition {text!r} cannot clear it"
    if OPERATORS[op](value, limit):
        return f"{field} {value} {op} {limit}"
    return None
