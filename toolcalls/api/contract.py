"""The API document's own rules, over every operation (so an endpoint added later is held to
them too): what ``manage.py lint_api_schema`` and the test suite check beside OpenAPI 3's
validity.

:func:`contract_problems` takes the document as ``/api/schema/`` serves it (a dict) and returns
one line per broken rule, ``"<METHOD> <path>: <problem>"`` (or ``"<JSON pointer>: <problem>"``
for a schema anywhere in it); empty when it holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema.protocols import Validator
from openapi_schema_validator import OAS30ReadValidator, OAS30WriteValidator

from toolcalls.api.request_ids import HEADER as REQUEST_ID_HEADER
from toolcalls.api.schema import BODY_METHODS, operations_of, shared_statuses
from toolcalls.schema_errors import error_text

_ERROR_REF = "#/components/schemas/Error"


def contract_problems(document: dict[str, Any]) -> list[str]:
    """Every rule broken by ``document``: descriptions, statuses, headers, bounds, examples,
    and no schema ``nullable`` without a ``type`` beside it (OpenAPI 3.0.3 gives that no
    meaning)."""
    found = [f"{at}: nullable without type" for at in _untyped_nullables(document, "#")]
    for path, method, operation in operations_of(document):
        where = f"{method.upper()} {path}"
        found += [f"{where}: {problem}" for problem in _problems(document, method, operation)]
    return found


def _untyped_nullables(node: Any, at: str, *, names: bool = False) -> Iterator[str]:
    """The JSON pointer of every schema under ``node`` with ``nullable`` and no ``type``
    (examples are data, not schemas: not searched; ``names``: ``node`` maps property names)."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _untyped_nullables(item, f"{at}/{index}")
    elif isinstance(node, dict):
        if not names and "nullable" in node and "type" not in node:
            yield at
        for key, value in node.items():
            if not names and key in ("example", "examples"):
                continue
            name = str(key).replace("~", "~0").replace("/", "~1")
            inner = not names and key == "properties"
            yield from _untyped_nullables(value, f"{at}/{name}", names=inner)


def _problems(document: dict[str, Any], method: str, operation: dict[str, Any]) -> Iterator[str]:
    for name in ("summary", "description"):
        if not operation.get(name):
            yield f"no {name}"
    responses = operation.get("responses", {})
    missing = [str(code) for code in shared_statuses(method, operation)]
    missing = [code for code in missing if code not in responses]
    if missing:
        yield f"undocumented statuses {', '.join(missing)}"
    for code, response in responses.items():
        yield from _response_problems(document, code, response)
    yield from _parameter_problems(operation)
    body = operation.get("requestBody")
    if body is None and method in BODY_METHODS:
        # The body is read all the same (its Idempotency-Key's fingerprint): an undocumented
        # one is ignored whatever it holds, where strict input refuses an unknown field.
        yield "no request body (an action that takes no fields: request=NoFields)"
    if body is not None:
        for media_type, media in body.get("content", {}).items():
            where = f"request {media_type}"
            yield from _example_problems(document, where, media, OAS30WriteValidator)


def _response_problems(
    document: dict[str, Any], code: str, response: dict[str, Any]
) -> Iterator[str]:
    if not response.get("description"):
        yield f"{code}: no description"
    if REQUEST_ID_HEADER not in response.get("headers", {}):
        yield f"{code}: no {REQUEST_ID_HEADER} header"
    content = response.get("content", {})
    if code.startswith(("4", "5")) and code != "503":
        refs = {media.get("schema", {}).get("$ref") for media in content.values()}
        if refs != {_ERROR_REF}:
            yield f"{code}: not the one error shape"
    if code.startswith("2"):
        for media_type, media in content.items():
            where = f"{code} {media_type}"
            yield from _example_problems(document, where, media, OAS30ReadValidator)


def _parameter_problems(operation: dict[str, Any]) -> Iterator[str]:
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        name = f"{parameter['in']} parameter {parameter['name']}"
        if schema.get("type") == "integer" and not {"minimum", "maximum"} <= set(schema):
            yield f"{name}: an integer without minimum and maximum"
        if (
            parameter["in"] == "header"
            and schema.get("type") == "string"
            and ("maxLength" not in schema)
        ):
            yield f"{name}: a header without maxLength"


def _example_problems(
    document: dict[str, Any], where: str, media: dict[str, Any], checker: type[Validator]
) -> Iterator[str]:
    """At least one example, and each valid against the media type's schema as ``checker``
    reads it (a response must hold its read-only required properties, a request none)."""
    examples = [item.get("value") for item in media.get("examples", {}).values()]
    if "example" in media:
        examples.append(media["example"])
    if not examples:
        yield f"{where}: no example"
    schema = {**media.get("schema", {}), "components": document.get("components", {})}
    validator = checker(schema)
    for value in examples:
        for error in validator.iter_errors(value):
            yield f"{where}: example invalid at {error_text(error)}"
