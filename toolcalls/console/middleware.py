"""Dates in the console are shown in the viewer's time zone (``ConsoleSettings.timezone``);
a form sent once its sender's session ended is said to be unsent."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils import timezone

from toolcalls.console.preferences import viewer_timezone


class ViewerTimezoneMiddleware:
    """Activate the signed-in viewer's time zone for the request (after authentication)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.user.is_authenticated:
            try:
                timezone.activate(zoneinfo.ZoneInfo(viewer_timezone(request=request)))
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


class UnsentFormMiddleware:
    """A console form sent after its sender's session ended is not recorded: ``login_required``
    answers it as it would a page, with the way to sign in, and what was typed is lost without
    a word. That answer to a ``POST`` gets ``unsent=1``, which the sign-in page explains
    (``registration/login.html``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.method == "POST" and response.status_code == 302:
            location = urlsplit(response["Location"])
            if location.path == resolve_url(settings.LOGIN_URL):
                joined = "&" if location.query else ""
                response["Location"] = location._replace(
                    query=f"{location.query}{joined}{urlencode({'unsent': 1})}"
                ).geturl()
        return response
