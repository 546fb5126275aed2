"""``Request-Id``: one ID per HTTP request, on its response, its log lines and its error body.

A caller's ``Request-Id`` (or ``X-Request-Id``) is kept when it is well formed (1 to 128 of
``A-Z a-z 0-9 . _ : -``, starting with a letter or digit), so a trace spans the caller's logs
and ours; otherwise the ID is generated (``req_`` and 32 hex digits). No models: the logging
configuration imports :class:`RequestIdFilter` before Django's apps are loaded (Django's signal
machinery loads no app).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.core.signals import request_finished
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

HEADER = "Request-Id"
_ACCEPTED = ("Request-Id", "X-Request-Id")
_WELL_FORMED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_CURRENT: ContextVar[str | None] = ContextVar("callgate_request_id", default=None)


def current_request_id() -> str | None:
    """The ID of the request being served on this thread, ``None`` outside a request."""
    return _CURRENT.get()


def _chosen(request: HttpRequest) -> str:
    for name in _ACCEPTED:
        value = request.headers.get(name, "")
        if _WELL_FORMED.fullmatch(value):
            return value
    return f"req_{uuid.uuid4().hex}"


class RequestIdMiddleware:
    """Choose the request's ID, hold it for the request, and send it back as ``Request-Id``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = _chosen(request)
        _CURRENT.set(request_id)
        response = self.get_response(request)
        response[HEADER] = request_id
        return response


@receiver(request_finished, dispatch_uid="callgate.request_ids.forget")
def _forget(**kwargs: Any) -> None:
    """Held until the response is closed, so Django's own line about the response
    (``django.request``, written after the middleware returns) names the request too."""
    _CURRENT.set(None)


class RequestIdFilter(logging.Filter):
    """Give every log record a ``request_id`` attribute: the current request's, or ``-``."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _CURRENT.get() or "-"
        return True
