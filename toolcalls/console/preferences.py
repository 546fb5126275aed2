"""Each person's console settings: the time zone dates are shown in."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest

from toolcalls.console.models import TIMEZONES, ConsoleSettings

#: The session key holding the viewer's time zone name, read from their settings once a session.
SESSION_KEY = "console_timezone"


def viewer_timezone(*, request: HttpRequest) -> str:
    """The signed-in viewer's IANA time zone name ("UTC" until they choose one); read from
    their settings once, then from the session."""
    name = request.session.get(SESSION_KEY)
    return str(name) if name is not None else _remember(request, request.user.pk)


def _remember(request: HttpRequest, user_pk: int | None) -> str:
    found = ConsoleSettings.objects.filter(pk=user_pk).first()
    name = found.timezone if found else "UTC"
    request.session[SESSION_KEY] = name
    return name


def timezone_remembered(*, request: HttpRequest | None, user: User, **_signal: Any) -> None:
    """On log-in (``user_logged_in``), keep the person's time zone in their new session."""
    if request is not None and hasattr(request, "session"):
        _remember(request, user.pk)


def viewer_timezone_set(*, request: HttpRequest, user: User, name: str) -> None:
    """Show ``user`` dates in ``name`` (an IANA time zone, one of ``TIMEZONES``) from now on,
    in this session and the next ones. Raises ``ValueError`` for an unknown name."""
    if name not in TIMEZONES:
        raise ValueError(f"unknown time zone {name!r}")
    ConsoleSettings.objects.update_or_create(user=user, defaults={"timezone": name})
    request.session[SESSION_KEY] = name
