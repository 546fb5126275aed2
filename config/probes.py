"""Health probes and the metrics scrape by the process's own address.

A kubelet probes, and Prometheus scrapes, each process at its address (``10.1.2.3:8000``), and
that is the ``Host`` they send: not a name ``ALLOWED_HOSTS`` lists, so Django answered 400 and
logged an ERROR for every probe and scrape. The probe and scrape paths answer the same whatever
host they are asked for (no link, redirect or cookie names it), so for them alone an unlisted
host is read as the first one ``ALLOWED_HOSTS`` lists; every other path still refuses it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.request import split_domain_port, validate_host

#: Paths whose answer names no host (``toolcalls.api`` health views, ``config.observability``).
PROBE_PATHS = frozenset({"/api/v1/health/live", "/api/v1/health/ready", "/metrics"})


class ProbeHostMiddleware:
    """Reads an unlisted ``Host`` of a :data:`PROBE_PATHS` request as the first listed host.
    First in ``MIDDLEWARE``: every later one may ask for the host."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path in PROBE_PATHS:
            _host_listed(request)
        return self.get_response(request)


def _host_listed(request: HttpRequest) -> None:
    listed = [host.lstrip(".") for host in settings.ALLOWED_HOSTS if host != "*"]
    sent = request.META.get("HTTP_HOST") or request.META.get("SERVER_NAME", "")
    domain, _port = split_domain_port(sent)
    if listed and not (domain and validate_host(domain, settings.ALLOWED_HOSTS)):
        request.META["HTTP_HOST"] = listed[0]
