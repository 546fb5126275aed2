"""Replay scripts as they come in (the API's ``replies``, a scenario file): every reply is checked
before a script is stored, so a reply the replay transport could only fail on is refused, named
by where it is, instead of failing the operation it would run (docs/scenarios.md)."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from providers.families import get_adapter
from providers.replay import REPLY_SCHEMA, ScriptProblem, script_problems
from toolcalls.errors import CallgateError
from toolcalls.schema_errors import errors_in_order, place_text

_REPLIES = Draft202012Validator({"type": "array", "minItems": 1, "items": REPLY_SCHEMA})


class ScriptError(CallgateError):
    """``invalid_replies``: the replies are not a script the replay transport can serve. The
    message names the first wrong part from the request body down (``replies/3/http_status:
    …``), ``details["fields"]["replies"]`` from the list of replies down (``3/http_status: …``),
    as the API's ``details.fields`` names every part of a field."""

    def __init__(self, problem: ScriptProblem) -> None:
        super().__init__(
            "invalid_replies",
            place_text(("replies", *problem.path), problem.message),
            details={"fields": {"replies": [problem_text(problem)]}},
        )


def shape_problem(replies: Any) -> ScriptProblem | None:
    """The first error of ``replies`` against :data:`providers.replay.REPLY_SCHEMA` (in order of
    place), ``None`` when they have its shape. Raises ``RecursionError`` for replies nested
    deeper than Python recurses."""
    errors = errors_in_order(_REPLIES, replies)
    return ScriptProblem(tuple(errors[0].absolute_path), errors[0].message) if errors else None


def replies_check(*, replies: Any, family: str) -> None:
    """Raises :class:`ScriptError` naming the first wrong part of ``replies`` as a replay script
    for ``family``: their shape (:func:`shape_problem`), then each reply as its kind requires
    and as the family's adapter reads it (:func:`providers.replay.script_problems`)."""
    problem = shape_problem(replies)
    if problem is None:
        problem = next(iter(script_problems(replies, get_adapter(family))), None)
    if problem is not None:
        raise ScriptError(problem)


def problem_text(problem: ScriptProblem) -> str:
    """``"<place>: <what>"``, the place from the list of replies down (``3/http_status``)."""
    return place_text(problem.path, problem.message)
