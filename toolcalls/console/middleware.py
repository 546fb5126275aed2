"""Dates in the console are shown in the viewer's time zone (``ConsoleSettings.timezone``)."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
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
