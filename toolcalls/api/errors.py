"""One error shape for every API failure:
``{"error": {"code", "message", "details", "request_id"}}``.

Codes are stable and machine-readable (``docs/api.md`` lists them). ``details`` is always an
object: ``{"fields": {name: [message, …]}}`` when inputs are wrong (a body field as its dotted
path, ``budgets.max_turns``; a query parameter, header or path parameter by its name; ``body``
for the body as a whole), the facts of a refusal for a few codes, ``{}`` otherwise.
``request_id`` is the response's ``Request-Id``. Installed as DRF's ``EXCEPTION_HANDLER``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings

from toolcalls.api.negotiation import charset_refused
from toolcalls.api.request_ids import current_request_id
from toolcalls.errors import CallgateError

log = logging.getLogger("callgate.api")

#: ``details.fields`` key of a problem with the request body as a whole.
BODY = "body"


class ApiError(exceptions.APIException):
    """An error with a chosen status, code and message; ``fields`` names the inputs that are
    wrong (name → messages), ``headers`` go on the response (``Retry-After``)."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        fields: Mapping[str, list[str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.message = message
        self.details = {"fields": dict(fields)} if fields else {}
        self.headers = dict(headers or {})


def error_body(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one error shape, with the current request's ID."""
    return {
        "error": {
            "code": code,
            "message": message,
            "details": dict(details or {}),
            "request_id": current_request_id(),
        }
    }


def field_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested validation detail as ``{dotted name: [message, …]}`` (``body`` for the body
    as a whole: DRF's non-field errors, or a body that is not an object)."""
    if isinstance(detail, dict):
        found: dict[str, list[str]] = {}
        for key, value in detail.items():
            key = "" if key == api_settings.NON_FIELD_ERRORS_KEY else str(key)
            name = ".".join(part for part in (prefix, key) if part)
            for path, messages in field_errors(value, name).items():
                found.setdefault(path, []).extend(messages)
        return found
    if isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        found = {}
        for index, item in enumerate(detail):
            found |= field_errors(item, f"{prefix}.{index}" if prefix else str(index))
        return found
    messages = detail if isinstance(detail, list) else [detail]
    return {prefix or BODY: [str(message) for message in messages]}


#: HTTP status of each :class:`CallgateError` code a service may raise into the API. Any other
#: code is 409 Conflict: the request is well formed, but the object's state does not allow it
#: (``already_ended``, ``not_escalated``, ``still_over``, ``already_decided``, ``superseded``).
STATUS_BY_CODE: dict[str, int] = {
    "unknown_family": 400,
    "unknown_transport": 400,
    "no_script": 400,
    "no_credentials": 400,
    "bad_budget": 400,
    "unknown_turn": 400,
    "bodies_pruned": 410,
    "invalid_messages": 400,
    "unknown_agent": 400,
    "reason_required": 400,
    "invalid_edit": 400,
    "invalid_server": 400,
    "invalid_tool": 400,
    "invalid_review": 400,
    "server_unreachable": 422,
    "self_approval": 403,
    "not_permitted": 403,
    "expired": 410,
}

#: :class:`CallgateError` codes that mean one input of the request is wrong, with the request
#: body field they name: 400 ``invalid_request`` with ``details.fields`` naming it (the
#: refusal's own ``details["fields"]`` when it has them: an agent's tool names ``agent``).
FIELD_BY_CODE: dict[str, str] = {"unknown_tool": "tools"}
#: Refusals that name the request's fields themselves (``details["fields"]``, by the service's
#: option names): 400 ``invalid_request`` naming them.
FIELDS_NAMED = ("agent_conflict", "invalid_agent", "invalid_model", "invalid_replies")
#: The request body's name of a service option, where the two differ.
BODY_NAMES = {"tool_names": "tools", "input_text": "input"}


def field_refusal(exc: CallgateError) -> Exception:
    """``exc`` as 400 ``invalid_request`` naming the body fields it refuses: a code of
    :data:`FIELD_BY_CODE`, an unsupported setting (``settings.<name>``) or one of
    :data:`FIELDS_NAMED`; any other refusal as it is."""
    if exc.code in FIELD_BY_CODE and "fields" in exc.details:  # the service named the field
        return ApiError(400, "invalid_request", exc.message, exc.details["fields"])
    if exc.code in FIELD_BY_CODE:
        message = "The request is not valid; see details."
        return ApiError(400, "invalid_request", message, {FIELD_BY_CODE[exc.code]: [exc.message]})
    if exc.code == "unsupported_setting":
        fields = {f"settings.{exc.details['setting']}": [exc.message]}
    elif exc.code in FIELDS_NAMED:
        named = exc.details["fields"].items()
        fields = {BODY_NAMES.get(name, name): list(messages) for name, messages in named}
    else:
        return exc
    return ApiError(400, "invalid_request", exc.message, fields)


_CODES: list[tuple[type[Exception], int, str]] = [
    (exceptions.NotAuthenticated, status.HTTP_401_UNAUTHORIZED, "unauthenticated"),
    (exceptions.AuthenticationFailed, status.HTTP_401_UNAUTHORIZED, "unauthenticated"),
    (exceptions.PermissionDenied, status.HTTP_403_FORBIDDEN, "forbidden"),
    (DjangoPermissionDenied, status.HTTP_403_FORBIDDEN, "forbidden"),
    (exceptions.NotFound, status.HTTP_404_NOT_FOUND, "not_found"),
    (Http404, status.HTTP_404_NOT_FOUND, "not_found"),
    (exceptions.MethodNotAllowed, status.HTTP_405_METHOD_NOT_ALLOWED, "method_not_allowed"),
    (exceptions.NotAcceptable, status.HTTP_406_NOT_ACCEPTABLE, "not_acceptable"),
    (exceptions.UnsupportedMediaType, 415, "unsupported_media_type"),
    (RequestDataTooBig, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "payload_too_large"),
    (exceptions.ParseError, status.HTTP_400_BAD_REQUEST, "malformed_request"),
    (exceptions.ValidationError, status.HTTP_400_BAD_REQUEST, "invalid_request"),
    (exceptions.Throttled, status.HTTP_429_TOO_MANY_REQUESTS, "rate_limited"),
]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """Map any exception raised in an API view to the one error shape."""
    if isinstance(exc, CallgateError):
        exc = field_refusal(exc)
    if isinstance(exc, ApiError):
        body = error_body(exc.error_code, exc.message, exc.details)
        return Response(body, exc.status_code, headers=exc.headers)
    if isinstance(exc, CallgateError):
        body = error_body(exc.code, exc.message, exc.details)
        return Response(body, STATUS_BY_CODE.get(exc.code, status.HTTP_409_CONFLICT))
    for kind, code_status, code in _CODES:
        if isinstance(exc, kind):
            headers = {}
            # DRF puts the challenge on the exception (``APIView.handle_exception``); a 401
            # must carry it (RFC 9110 §15.5.2).
            challenge = getattr(exc, "auth_header", None)
            if challenge:
                headers["WWW-Authenticate"] = str(challenge)
            if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
                headers["Retry-After"] = str(max(1, round(exc.wait)))
            details = (
                {"fields": field_errors(exc.detail)}
                if isinstance(exc, exceptions.ValidationError)
                else {}
            )
            if isinstance(exc, exceptions.UnsupportedMediaType) and "request" in context:
                message = _media_message(context["request"])
            else:
                message = _message(exc, code)
            return Response(error_body(code, message, details), code_status, headers=headers)
    log.exception("unhandled API error", exc_info=exc)
    body = error_body("internal_error", "Something went wrong on our side; it was logged.")
    return Response(body, status.HTTP_500_INTERNAL_SERVER_ERROR)


def _message(exc: Exception, code: str) -> str:
    if isinstance(exc, exceptions.ValidationError):
        return "The request is not valid; see details."
    if isinstance(exc, exceptions.APIException) and isinstance(exc.detail, str):
        return str(exc.detail)
    return {
        "not_found": "No such object.",
        "forbidden": "Not allowed.",
        "payload_too_large": "The request body is larger than this API accepts.",
    }.get(code, str(exc))


def _media_message(request: Request) -> str:
    """A 415's message: that the body came without a ``Content-Type`` (the server passes none:
    PEP 3333 leaves ``CONTENT_TYPE`` empty or out), or in a charset other than UTF-8
    (:func:`~toolcalls.api.negotiation.charset_refused`), or with which, and what to send."""
    types = [parser.media_type for parser in request.parsers]
    wanted = " or ".join(types)
    sent = request.content_type.strip()
    if not sent:
        return f"The request has a body but no Content-Type header; send Content-Type: {wanted}."
    charset = charset_refused(sent)
    if charset is not None and sent.split(";", 1)[0].strip().lower() in types:
        return (
            f'A JSON body is read as UTF-8 (RFC 8259), not in charset "{charset}"; send it in '
            f"UTF-8 with Content-Type: {wanted}."
        )
    return f'Unsupported media type "{sent}" in request; send Content-Type: {wanted}.'


@csrf_exempt  # an unknown path answers 404 to any method, never an HTML CSRF page
def unknown_path(request: HttpRequest, path: str = "") -> HttpResponse:
    """Any other path under ``/api/``: 404 in the error shape, not Django's HTML page, written
    as DRF writes every other answer (``JSONRenderer``: compact, UTF-8)."""
    body = error_body("not_found", f"No endpoint {request.path}.")
    return HttpResponse(JSONRenderer().render(body), status=404, content_type="application/json")
