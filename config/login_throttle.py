"""Failed sign-ins are limited, on the console's sign-in page and the admin's alike.

Django checks every password sent to it, as often as it is sent, so a password could be
guessed at the speed of the server. Here each failed sign-in (Django's ``user_login_failed``)
is counted for the user name tried and the address it came from; once
``CALLGATE_LOGIN_FAILURES`` of them fall within ``CALLGATE_LOGIN_WINDOW_S`` seconds, a sign-in
for that user name from that address answers ``429`` with ``Retry-After`` until the oldest of
them is out of the window, and the password sent is not checked at all (so it tells nothing).
A successful sign-in forgets the failures counted for its user name and address.

The counts live in the default cache (``CACHE_URL``): Redis shares them between the web
processes, as for the API's throttle. Behind a proxy every request comes from the proxy's
address, so the count is then the user name's alone.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.urls import reverse
from django.utils.html import format_html

_PREFIX = "callgate:login-failures:"


def _key(username: str, address: str) -> str:
    """The cache key of the failures counted for ``username`` (in any case) from ``address``."""
    digest = hashlib.sha256(f"{username.casefold()}\n{address}".encode()).hexdigest()
    return f"{_PREFIX}{digest}"


def _address(request: HttpRequest) -> str:
    return str(request.META.get("REMOTE_ADDR", ""))


def _recent(key: str, now: float) -> list[float]:
    """The times of the failures kept under ``key`` that are still within the window."""
    window = settings.CALLGATE_LOGIN_WINDOW_S
    stored = cache.get(key)
    if not isinstance(stored, list):
        return []
    return [moment for moment in stored if isinstance(moment, float) and now - moment < window]


def _wait_s(request: HttpRequest, username: str) -> int:
    """Seconds until a sign-in for ``username`` from the request's address is taken again (0:
    now)."""
    now = time.time()
    failures = _recent(_key(username, _address(request)), now)
    if len(failures) < settings.CALLGATE_LOGIN_FAILURES:
        return 0
    oldest = failures[-settings.CALLGATE_LOGIN_FAILURES]
    return max(1, math.ceil(oldest + settings.CALLGATE_LOGIN_WINDOW_S - now))


def _username(credentials: dict[str, Any]) -> str:
    value = credentials.get("username", "")
    return value if isinstance(value, str) else ""


@receiver(user_login_failed, dispatch_uid="callgate-login-failure-counted")
def _failure_counted(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    if request is None:
        return
    key = _key(_username(credentials), _address(request))
    now = time.time()
    failures = [*_recent(key, now), now][-settings.CALLGATE_LOGIN_FAILURES :]
    cache.set(key, failures, timeout=settings.CALLGATE_LOGIN_WINDOW_S)


@receiver(user_logged_in, dispatch_uid="callgate-login-failures-forgotten")
def _failures_forgotten(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    if request is None:
        return
    cache.delete(_key(user.get_username(), _address(request)))


def _sign_in_paths() -> frozenset[str]:
    return frozenset({resolve_url(settings.LOGIN_URL), reverse("admin:login")})


class LoginThrottleMiddleware:
    """Answer ``429`` to a sign-in (a ``POST`` to the console's or the admin's sign-in page)
    for a user name that failed too often from the same address (see the module)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and request.path_info in _sign_in_paths():
            wait_s = _wait_s(request, request.POST.get("username", ""))
            if wait_s:
                return _refused(request, wait_s)
        return self.get_response(request)


def _refused(request: HttpRequest, wait_s: int) -> HttpResponse:
    minutes = math.ceil(wait_s / 60)
    body = format_html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Too many failed sign-ins · Callgate</title></head><body><main>"
        "<h1>Too many failed sign-ins</h1>"
        "<p>This user name failed to sign in too often from your address. "
        "Nothing was checked this time. Try again in {} minute{}.</p>"
        '<p><a href="{}">Back to the sign-in page</a></p></main></body></html>',
        minutes,
        "" if minutes == 1 else "s",
        request.path,
    )
    return HttpResponse(body, status=429, headers={"Retry-After": str(wait_s)})
