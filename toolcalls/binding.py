"""Canonical JSON, digests and result binding (docs/design.md §7: call correlation is not result
binding).

Canonical form is RFC 8785 (JSON Canonicalization Scheme), as the ``rfc8785`` package writes it
(:func:`canonical_json`); every digest is SHA-256 over it, as 64 lower-case hex characters.
RFC 8785 takes I-JSON (RFC 7493), and so does every JSON document Callgate reads from a person
or a service (:func:`exact_json_loads`): each member name once in its object, every number
within ±(2**53-1).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import rfc8785

from toolcalls.schema_errors import place_text

CanonicalizationError = rfc8785.CanonicalizationError

#: The largest magnitude a JSON number is carried exactly with (I-JSON, RFC 7493 §2.2). Beyond
#: it every binary64 number is a whole one that a reader may round, and PostgreSQL's jsonb
#: writes any number as digits (1e20 comes back as the integer 100000000000000000000).
SAFE_INTEGER = 2**53 - 1


class InexactJson(CanonicalizationError):
    """What JSON cannot carry exactly (a number beyond ±:data:`SAFE_INTEGER`, NaN, a member
    name given twice in one object), at ``path``: the keys and list indexes from the value down
    to it. The message names the place as ``a/0/b`` (:func:`~toolcalls.schema_errors.place_text`)
    and says what is wrong there."""

    def __init__(self, path: Sequence[str | int], problem: str) -> None:
        super().__init__(place_text(path, problem))
        self.path = tuple(path)


class _Repeated(dict[str, Any]):
    """An object :func:`exact_json_loads` read with a member name given twice (``repeated``),
    kept until the whole document is read so that the refusal can name its place."""

    repeated = ""


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    marked = _Repeated(members)
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            marked.repeated = name
            break
        seen.add(name)
    return marked


class _Vanished(float):
    """A number written non-zero that a double holds only as zero (``1e-400``), read by
    :func:`exact_json_loads` and kept until the whole document is read so that the refusal can
    name its place."""


def _float(text: str) -> float:
    number = float(text)
    digits = text.lower().partition("e")[0]
    if number == 0 and digits.strip("-.0"):
        return _Vanished(number)
    return number


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def exact_json_loads(text: str | bytes) -> Any:
    """The one JSON document ``text`` holds, as I-JSON (RFC 7493) has it. Raises
    :class:`InexactJson` naming the first place (in document order) where a member name is
    given twice in one object (§2.3: Python's reader keeps the last one, so ``{"decision":
    "deny", "decision": "approve"}`` would approve), a number is beyond ±(2**53-1) or written
    non-zero where a double holds only zero (``1e-400``) (§2.2);
    ``ValueError`` for text that is not JSON (``NaN`` and ``Infinity`` too); ``RecursionError``
    when nested deeper than Python parses."""
    value = json.loads(
        text, object_pairs_hook=_members, parse_constant=_not_json, parse_float=_float
    )
    exact_check(value)
    return value


def exact_check(value: Any) -> None:
    """Raise :class:`InexactJson` for the first place (in document order) where ``value`` holds
    what JSON cannot carry exactly: a number beyond ±(2**53-1), whether written as a whole
    number or not (``1e20`` is ``100000000000000000000``), NaN, or, in what
    :func:`exact_json_loads` read, a member name given twice. Iterative: the depth is the
    sender's choice."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Repeated):
            problem = "given twice in one object; JSON objects may not repeat a member name"
            raise InexactJson((*path, item.repeated), f"{problem} (I-JSON, RFC 7493 §2.3)")
        if isinstance(item, dict):
            stack += [(child, (*path, key)) for key, child in reversed(item.items())]
        elif isinstance(item, list | tuple):
            stack += [(item[i], (*path, i)) for i in range(len(item) - 1, -1, -1)]
        elif isinstance(item, _Vanished):
            problem = "a number written non-zero that a double holds only as 0"
            raise InexactJson(path, f"{problem} (below ±4.9e-324; I-JSON, RFC 7493 §2.2)")
        elif isinstance(item, int | float) and not isinstance(item, bool):
            problem = _number_problem(item)
            if problem:
                raise InexactJson(path, problem)


def _number_problem(number: float) -> str:
    if number != number:
        return "NaN is not a JSON number"
    if -SAFE_INTEGER <= number <= SAFE_INTEGER:
        return ""
    text = str(number)
    if text in ("inf", "-inf"):  # written past what a double holds (1e400): read as infinite
        shown = "a number past ±1.8e308"
    else:
        shown = text if len(text) <= 24 else f"{text[:12]}… ({len(text.lstrip('-'))} digits)"
    return (
        f"{shown} is beyond ±{SAFE_INTEGER}, the numbers JSON carries exactly "
        "(I-JSON, RFC 7493 §2.2)"
    )


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of ``value``; raises :data:`CanonicalizationError` for values JSON cannot
    represent exactly: :class:`InexactJson` naming the place of a number beyond ±(2**53-1),
    whole or not, or NaN (:func:`exact_check`); infinite floats, keys that are not strings, text
    that is not valid Unicode.

    A value whose canonical form is plain JSON (:func:`_plain`) is written by the standard
    library's C encoder, keys sorted, no spaces, text as UTF-8: byte for byte what ``rfc8785``
    writes, about four times faster (a step hashes every event it records); any other value
    (a float, whose RFC 8785 form is ECMAScript's, or a key beyond ASCII, which RFC 8785 orders
    by UTF-16) is written by ``rfc8785``."""
    if _plain(value):
        try:
            return _ENCODER.encode(value).encode()
        except UnicodeEncodeError:  # a lone surrogate: rfc8785 refuses it with its own error
            pass
    # rfc8785 writes 1e20 as 100000000000000000000 and 2**53 not at all: refused alike, by place.
    exact_check(value)
    try:
        return rfc8785.dumps(value)
    except UnicodeEncodeError as exc:  # rfc8785 orders keys by UTF-16: a lone surrogate in one
        raise CanonicalizationError(f"a key is not valid Unicode: {exc.reason}") from exc


#: Sorted keys, no spaces, text escaped only where RFC 8785 escapes it (quote, backslash,
#: control characters, with the same short forms and lower-case ``\u00xx``).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of ``None``, booleans, integers within ±(2**53-1), text,
    lists, tuples and dicts with ASCII text keys: values whose RFC 8785 form is the plain JSON
    :data:`_ENCODER` writes."""
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return -SAFE_INTEGER <= value <= SAFE_INTEGER
    if isinstance(value, dict):
        return all(
            isinstance(key, str) and key.isascii() and _plain(item) for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return all(_plain(item) for item in value)
    return False


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
