"""``Idempotency-Key`` on every POST, per API key: a retried request gets the first one's answer.

The first request with a key runs and its response (any status below 500) is stored; the same
key with the same method, path and body gets that response again (``Idempotent-Replayed:
true``); the same key with a different request is 409 ``idempotency_key_reused``; while the
first is still running, 409 ``idempotency_key_in_flight``. A 5xx is not stored, so the client's
retry runs again. A reservation still in flight after ``CALLGATE_API_IN_FLIGHT_S`` seconds
belongs to a request whose process died (far beyond any web worker's timeout): the next
identical request takes it over and runs.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.request import Request
from rest_framework.response import Response

from toolcalls.api.errors import ApiError
from toolcalls.api.models import ApiKey, IdempotentRequest
from toolcalls.api.request_ids import current_request_id

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
#: A key as the server takes it (ECMA 262 reads the pattern as Python does, so a schema can): no
#: surrounding white space (HTTP drops it), no control character, and no comma, as two
#: ``Idempotency-Key`` headers reach the application joined by one (RFC 9110 §5.3: gunicorn
#: and Django's development server alike), which must not be taken as one key ``k1,k2``.
KEY_PATTERN = (
    r"^[^\s,\u0000-\u001f\u007f-\u009f]"
    r"(?:[^,\u0000-\u001f\u007f-\u009f]*[^\s,\u0000-\u001f\u007f-\u009f])?$"
)
_KEY = re.compile(KEY_PATTERN)
#: Seconds a client is asked to wait (``Retry-After``) before sending a request again whose key
#: is still in flight: most requests finish well within it.
IN_FLIGHT_RETRY_AFTER_S = 1


def _key(request: Request) -> str:
    """The request's key, refused 400 when missing (``idempotency_key_required``) or not one
    key as :data:`KEY_PATTERN` says (``invalid_request`` naming the header)."""
    value = request.headers.get(HEADER, "").strip()
    if not value:
        message = f"Send an {HEADER} header."
        raise ApiError(400, "idempotency_key_required", message, {HEADER: [message]})
    if len(value) > MAX_KEY_LENGTH:
        message = f"{HEADER} is longer than {MAX_KEY_LENGTH}."
    elif "," in value:
        message = (
            f"{HEADER} was sent more than once, or holds a comma (two headers arrive joined by "
            "one): send one key, without commas."
        )
    elif not _KEY.fullmatch(value):
        control = next(char for char in value if unicodedata.category(char) == "Cc")
        message = f"{HEADER} holds the control character U+{ord(control):04X}; send visible text."
    else:
        return value
    raise ApiError(400, "invalid_request", message, {HEADER: [message]})


def _fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.method} {request.path}\n{body}".encode()).hexdigest()


def _reserve(key: ApiKey, value: str, fingerprint: str) -> IdempotentRequest | None:
    """Reserve ``value`` for this request; return the earlier request's row when there is one
    (``None``: reserved, run the handler)."""
    while True:
        try:
            with transaction.atomic():
                IdempotentRequest.objects.create(api_key=key, key=value, request_sha256=fingerprint)
            return None
        except IntegrityError:
            earlier = IdempotentRequest.objects.filter(api_key=key, key=value).first()
        if earlier is None:
            continue  # the earlier request ended in a 5xx and let go of the key: try again
        if _take_over_abandoned(earlier, fingerprint):
            return None
        return earlier


def _take_over_abandoned(earlier: IdempotentRequest, fingerprint: str) -> bool:
    """Claim an identical reservation left in flight by a dead process; one request wins."""
    stale_before = timezone.now() - timedelta(seconds=settings.CALLGATE_API_IN_FLIGHT_S)
    if (
        earlier.state != IdempotentRequest.State.IN_FLIGHT
        or earlier.request_sha256 != fingerprint
        or earlier.created_at >= stale_before
    ):
        return False
    claimed = IdempotentRequest.objects.filter(
        pk=earlier.pk, state=earlier.state, created_at=earlier.created_at
    ).update(created_at=timezone.now())
    return claimed == 1


def idempotent(handler: Callable[..., Response]) -> Callable[..., Response]:
    """Wrap a POST handler of an API view (``self.handle_exception`` renders its errors)."""

    @wraps(handler)
    def wrapper(view: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        value = _key(request)
        fingerprint = _fingerprint(request)
        earlier = _reserve(request.auth, value, fingerprint)
        if earlier is not None:
            return _replay(earlier, fingerprint)
        try:
            response = handler(view, request, *args, **kwargs)
        except Exception as exc:  # rendered like any API error, then remembered
            response = view.handle_exception(exc)
        rows = IdempotentRequest.objects.filter(api_key=request.auth, key=value)
        if response.status_code >= 500:
            rows.delete()
        else:
            rows.update(
                state=IdempotentRequest.State.DONE,
                response_status=response.status_code,
                response_body=response.data,
            )
        return response

    return wrapper


def _replay(earlier: IdempotentRequest, fingerprint: str) -> Response:
    if earlier.request_sha256 != fingerprint:
        raise ApiError(
            409,
            "idempotency_key_reused",
            f"This {HEADER} was used for a different request.",
        )
    if earlier.state == IdempotentRequest.State.IN_FLIGHT:
        raise ApiError(
            409,
            "idempotency_key_in_flight",
            f"A request with this {HEADER} is still being processed; retry later.",
            headers={"Retry-After": str(IN_FLIGHT_RETRY_AFTER_S)},
        )
    body = earlier.response_body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        # The error is the first request's; the ID is this one's, as its Request-Id says.
        body = {"error": {**body["error"], "request_id": current_request_id()}}
    response = Response(body, status=earlier.response_status)
    response["Idempotent-Replayed"] = "true"
    return response
