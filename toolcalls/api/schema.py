"""The OpenAPI document, exact to what the server does (drf-spectacular).

- :class:`ContractSchema` (``DEFAULT_SCHEMA_CLASS``): every property of a response shape is
  ``required``, as every response serializer writes every field (``null`` when absent); a
  serializer names the few it may leave out in ``sometimes_absent``.
- :func:`complete_responses` (a postprocessing hook) adds what every endpoint shares, so an
  endpoint added later is documented the same way without repeating it: each status the
  conventions can return (400, 401, 403, 404, 405, 406, 409, 413, 415, 429, 500) in the one error
  shape, and the response headers (``Request-Id``, ``RateLimit-*``, ``Retry-After``,
  ``Idempotent-Replayed``).
- :func:`strict_request_bodies`: ``additionalProperties: false`` on every request body.
- :func:`null_as_branch`: an object or choice that may be null says so by its null branch alone.

:mod:`toolcalls.api.contract` checks the result (``manage.py lint_api_schema``).
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance
from rest_framework import serializers

from toolcalls.api.idempotency import HEADER as IDEMPOTENCY_HEADER
from toolcalls.api.request_ids import HEADER as REQUEST_ID_HEADER
from toolcalls.api.serializers import OptionalText, StrictSerializer, may_not_be_blank
from toolcalls.text import visible_pattern


class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "toolcalls.api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key `cg_<prefix>_<secret>`, bound to one tenant and its scopes.",
        }


_BLANK = {"type": "string", "maxLength": 0}
_NULL = {"enum": [None]}


class ContractSchema(AutoSchema):
    """drf-spectacular's schema with every response property required (but a serializer's
    ``sometimes_absent`` names), request text that may not be blank saying so (a visible
    character, :func:`~toolcalls.text.visible_pattern`, and no ``""`` as its default),
    what a serializer's ``documented`` says of a field's values beside its type (bounds the
    service checks), a nested list's ``minItems`` and ``maxItems``,
    blank-or-formatted text as ``anyOf``, optional text that may be sent as ``null`` or ``""``
    (:class:`~toolcalls.api.serializers.OptionalText`) as ``anyOf`` the text, ``""`` and
    null, an object or null as ``oneOf``, and a list of names that takes each once as
    ``uniqueItems``."""

    def _map_serializer_field(
        self, field: Any, direction: str, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        own_pattern = any(isinstance(v, RegexValidator) for v in field.validators)
        if (
            direction == "request"
            and may_not_be_blank(field)
            and not own_pattern
            and schema.get("type") == "string"
        ):
            # Text of white space and format characters only is blank (StrictSerializer). A
            # field with its own pattern says that one (drf-spectacular adds it when none is set).
            schema.setdefault("pattern", visible_pattern())
        if getattr(field, "unique_items", False):
            schema["uniqueItems"] = True  # serializers.NameList refuses a name given twice
        if isinstance(field, serializers.ListSerializer):
            # A nested list's bounds (``messages``), which drf-spectacular writes for a
            # ListField only.
            for keyword, bound in (("minItems", field.min_length), ("maxItems", field.max_length)):
                if bound is not None:
                    schema[keyword] = bound
        if (
            direction == "request"
            and schema.get("default") == ""
            and not field.allow_blank
            and not isinstance(field, OptionalText)
        ):
            # "Absent" is stored as "", which the field refuses from a client: no default to send.
            del schema["default"]
        return schema

    def _get_request_for_media_type(
        self, serializer: Any, direction: str = "request"
    ) -> tuple[dict[str, Any] | None, bool]:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        if schema is None and isinstance(force_instance(serializer), StrictSerializer):
            # A body of no fields (``NoFields``) is still read, and refused when it holds one:
            # documented (drf-spectacular leaves an empty serializer out), and with it 413, 415.
            return {"type": "object", "additionalProperties": False}, False
        return schema, required

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request":
            _none_given(schema, serializer)
        properties = schema.get("properties", {})
        for name, documented in getattr(serializer, "documented", {}).items():
            # What the service checks of a field's value, stated beside its JSON type; an enum
            # lists every value, so no text bounds beside it.
            properties[name] = {**properties[name], **documented}
            if "enum" in documented:
                for keyword in ("pattern", "minLength", "maxLength"):
                    properties[name].pop(keyword, None)
        for value in schema.get("properties", {}).values():
            if value.get("oneOf", [None])[-1] == _BLANK:
                # drf-spectacular's "a URI (or a pattern's text) or blank": "" may match both.
                value["anyOf"] = value.pop("oneOf")
            if value.get("nullable") and len(value.get("allOf", ())) == 1:
                # A nested object or null: null does not match the object's own schema, so
                # ``allOf`` with ``nullable`` allows no null; one of the object and null does.
                value["oneOf"] = [*value.pop("allOf"), _NULL]
        if direction == "response" and schema.get("properties"):
            absent = set(getattr(serializer, "sometimes_absent", ()))
            schema["required"] = sorted(set(schema["properties"]) - absent)
            if not schema["required"]:
                del schema["required"]  # OpenAPI 3.0: at least one name when present
        return schema


def _none_given(schema: dict[str, Any], serializer: Any) -> None:
    """Each property of ``schema`` read by an :class:`OptionalText` that refuses blank text
    takes ``null`` and ``""`` too, which mean none given, as leaving it out does: one of the
    text the field takes (its bounds and format as drf-spectacular wrote them), ``""`` and
    null."""
    properties = schema.get("properties", {})
    for name, field in serializer.fields.items():
        if isinstance(field, OptionalText) and not field.allow_blank and name in properties:
            text = properties[name]
            default = text.pop("default", "")
            text.pop("nullable", None)
            properties[name] = {"anyOf": [text, _BLANK, _NULL], "default": default}


def null_as_branch(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """A property that is one of several schemas or null (``oneOf`` with a null branch: a
    nested object, or a choice as its enum component) drops ``nullable``: the null branch
    already admits null, and OpenAPI 3.0.3's ``nullable`` means nothing without a ``type``
    beside it (``contract.py`` refuses it). Runs after drf-spectacular's enum hook."""
    schemas = result.get("components", {}).get("schemas", {})
    nulls = {f"#/components/schemas/{name}" for name, s in schemas.items() if s == _NULL}
    for schema in schemas.values():
        for value in schema.get("properties", {}).values():
            branches = value.get("oneOf", ())
            if "type" not in value and any(b == _NULL or b.get("$ref") in nulls for b in branches):
                value.pop("nullable", None)
    return result


def strict_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Every component used as a request body, and every component inside one (a message of
    ``messages``, ``settings``), takes no other properties (``additionalProperties: false``),
    as ``StrictSerializer`` enforces."""
    schemas = result.get("components", {}).get("schemas", {})
    waiting = [
        media.get("schema", {})
        for _, _, operation in operations_of(result)
        for media in operation.get("requestBody", {}).get("content", {}).values()
    ]
    seen: set[str] = set()
    while waiting:
        name = waiting.pop().get("$ref", "").rsplit("/", 1)[-1]
        if name in schemas and name not in seen and "properties" in schemas[name]:
            seen.add(name)
            schemas[name]["additionalProperties"] = False
            waiting.extend(_referenced(schemas[name]))
    return result


def _referenced(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schemas a component's properties hold or list (each a ``$ref`` or inline)."""
    found = []
    for value in schema.get("properties", {}).values():
        found.append(value)
        found.append(value.get("items", {}))
        found.extend([*value.get("allOf", ()), *value.get("oneOf", ())])
    return found


#: What each status means wherever an endpoint returns it; an endpoint's own description wins.
STATUS_DESCRIPTIONS = {
    400: "The request is not valid: an unknown or wrong query parameter, body field or header "
    "(`details.fields` names each; a query parameter given twice is wrong unless it is an "
    "array), a body that is not JSON (an empty one too) or not I-JSON (a member name given twice "
    "in one object, a number beyond ±(2^53-1)) or sent chunked (send a `Content-Length`), a "
    "missing `Idempotency-Key`, or a cursor of another list.",
    401: "No API key, or an unknown or revoked one.",
    403: "The key lacks the scope this request needs, or its service may not do this.",
    404: "No such object in the key's tenant.",
    405: "The endpoint does not take this method.",
    406: "The `Accept` header excludes every type this endpoint answers in (names none of them, "
    "or refuses them with `q=0`).",
    409: "The object's state does not allow this, or the `Idempotency-Key` was used for another "
    "request or is still in flight (then with `Retry-After`).",
    410: "The approval expired before the decision.",
    422: "The MCP server cannot be reached, or its tool listing cannot be used; nothing was saved.",
    413: "The body is larger than this API accepts.",
    415: "The body came without a `Content-Type` header, or with another than "
    "`application/json` (a media range such as `*/*` too), or declared in a charset other than "
    "UTF-8; the message says which and what to send. Nothing was read.",
    429: "Over the key's rate limit: retry after `Retry-After` seconds.",
    500: "A bug on our side; it was logged under the `Request-Id`.",
    503: "Not ready: retry after `Retry-After` seconds.",
}

_INTEGER = {"type": "integer", "minimum": 0}
HEADERS: dict[str, dict[str, Any]] = {
    REQUEST_ID_HEADER: {
        "description": "This request's ID: the caller's `Request-Id` (or `X-Request-Id`) when "
        "well formed, else generated (`req_` and 32 hex digits). In the error body and every "
        "log line of the request too.",
        "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"},
    },
    "RateLimit-Limit": {
        "description": "Requests the key may send per window (once its scopes were checked).",
        "schema": _INTEGER,
    },
    "RateLimit-Remaining": {"description": "Requests left in the window now.", "schema": _INTEGER},
    "RateLimit-Reset": {
        "description": "Seconds until the window frees its next slot.",
        "schema": _INTEGER,
    },
    "Retry-After": {
        "description": "Seconds to wait before sending the request again.",
        "schema": {"type": "integer", "minimum": 1},
    },
    "Idempotent-Replayed": {
        "description": "`true` when this is the stored response of an earlier request with the "
        "same `Idempotency-Key` (absent otherwise).",
        "schema": {"type": "string", "enum": ["true"]},
    },
}
_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def complete_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Add the shared statuses (in the one error shape) and response headers to every
    operation, and the shared description to each status that has none; an operation that
    needs no key says so (``security: []``), and the document's server is the one serving it
    (its paths carry ``/api/v1``)."""
    result.setdefault("servers", [{"url": "/", "description": "The server serving this document"}])
    for _, method, operation in operations_of(result):
        operation.setdefault("security", [])
        responses = operation.setdefault("responses", {})
        for code in shared_statuses(method, operation):
            responses.setdefault(str(code), {"content": _ERROR})
        for code, response in responses.items():
            if not response.get("description"):
                response["description"] = STATUS_DESCRIPTIONS.get(int(code), "")
            response["headers"] = {
                name: HEADERS[name] for name in _headers(int(code), operation)
            } | response.get("headers", {})
    return result


#: A path parameter naming an object → the field of the object that holds it.
_KEYS = {"public_id": "id", "name": "name"}


def link_operations(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """OpenAPI links (what a client, or schemathesis' stateful phase, can do next): a response
    holding an object that has its own path (``…/{public_id}`` or ``…/{name}``, read by a GET
    answering that shape) links to every operation on that path and under it, the parameter
    taken from the response (the object's ``id`` or ``name``; in a page, the first result's;
    in a list, the first item's)."""
    detail: dict[str, tuple[str, str]] = {}
    for path, method, operation in operations_of(result):
        name, parameter = _shape(operation, "200"), path.rsplit("/", 1)[-1].strip("{}")
        if method == "get" and parameter in _KEYS and name:
            detail[name] = (path, parameter)
    schemas = result.get("components", {}).get("schemas", {})
    for _, _, operation in operations_of(result):
        for code, response in operation.get("responses", {}).items():
            name, pointer = _shape(operation, code), ""
            items = schemas.get(name, {}).get("properties", {}).get("results", {}).get("items")
            if items and name not in detail:
                name, pointer = items.get("$ref", "").rsplit("/", 1)[-1], "/results/0"
            if not name:
                name, pointer = _shape(operation, code, items=True), "/0"
            if not code.startswith("2") or name not in detail:
                continue
            path, parameter = detail[name]
            response["links"] = {
                target["operationId"]: {
                    "operationId": target["operationId"],
                    "parameters": {parameter: f"$response.body#{pointer}/{_KEYS[parameter]}"},
                }
                for under, _, target in operations_of(result)
                if under == path or under.startswith(f"{path}/")
            }
    return result


def _shape(operation: dict[str, Any], code: str, *, items: bool = False) -> str:
    """The component name of the JSON response ``code`` (with ``items``: of the items of a
    JSON array response); "" when none."""
    content = operation.get("responses", {}).get(code, {}).get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    ref: str = (schema.get("items", {}) if items else schema).get("$ref", "")
    return ref.rsplit("/", 1)[-1]


#: The methods whose request the server reads a body of (``toolcalls.api.contract`` wants it
#: documented, ``NoFields`` when it takes none).
BODY_METHODS = ("post", "put", "patch")


def shared_statuses(method: str, operation: dict[str, Any]) -> list[int]:
    """Statuses every endpoint of this kind can return: strict input (400), the path's other
    methods (405), content negotiation (406), a bug (500); with a key, 401, 403 and 429; with
    a path parameter, 404; with a body (any POST, PUT or PATCH: the server reads one, named in
    the document or not), 413 and 415; with an ``Idempotency-Key``, 409."""
    codes = [400, 405, 406, 500]
    if _secured(operation):
        codes += [401, 403, 429]
    if any(p["in"] == "path" for p in operation.get("parameters", [])):
        codes.append(404)
    if "requestBody" in operation or method in BODY_METHODS:
        codes += [413, 415]
    if _idempotent(operation):
        codes.append(409)
    return sorted(codes)


def _headers(code: int, operation: dict[str, Any]) -> list[str]:
    names = [REQUEST_ID_HEADER]
    if _secured(operation) and code not in (401, 403, 406):
        # The throttle runs once the key and its scopes were checked; it answers 429 itself.
        names += ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]
    if code in (429, 503) or (code == 409 and _idempotent(operation)):
        names.append("Retry-After")
    if _idempotent(operation) and code < 500:
        names.append("Idempotent-Replayed")
    return names


def _secured(operation: dict[str, Any]) -> bool:
    return any(requirement for requirement in operation.get("security", []))


def _idempotent(operation: dict[str, Any]) -> bool:
    return any(
        p["in"] == "header" and p["name"] == IDEMPOTENCY_HEADER
        for p in operation.get("parameters", [])
    )


def operations_of(result: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """``(path, method, operation)`` for every operation of the document."""
    return [
        (path, method, operation)
        for path, item in result.get("paths", {}).items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "patch", "delete", "head", "options", "trace")
    ]
