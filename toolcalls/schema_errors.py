"""JSON Schema errors as Callgate's messages name them (the model's error envelopes, the API's
400s, a scenario file's refusal, the OpenAPI examples' check): where in the value, then what. A
check beyond the schema names its places the same way (a replay script's replies).

A place is the path of keys and list indexes from the validated value down to the wrong part,
joined by ``/`` (``replies/0/http_status``); the value itself is :data:`ROOT`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jsonschema import ValidationError
from jsonschema.protocols import Validator

#: The place of the validated value itself.
ROOT = "(root)"


def place_text(path: Iterable[str | int], message: str) -> str:
    """``"<place>: <message>"``, the place of ``path`` (keys and list indexes) as ``a/0/b``, or
    :data:`ROOT` for an empty one."""
    place = "/".join(str(part) for part in path) or ROOT
    return f"{place}: {message}"


def error_text(error: ValidationError) -> str:
    """``"<place>: <jsonschema's message>"``, the place as ``a/0/b`` or :data:`ROOT`."""
    return place_text(error.absolute_path, error.message)


def errors_in_order(validator: Validator, value: Any) -> list[ValidationError]:
    """Every error of ``value`` under ``validator``, in the order of their places (the value
    itself first). Raises ``RecursionError`` for a value nested deeper than Python recurses."""
    return sorted(validator.iter_errors(value), key=lambda error: list(error.absolute_path))
