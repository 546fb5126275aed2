"""A process's traces and the ``/metrics`` endpoint.

Traces are configured by the standard OpenTelemetry environment variables ("OpenTelemetry
Environment Variable Specification"): ``OTEL_TRACES_EXPORTER`` (``otlp`` — OTLP over HTTP, to
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` — ``console``, both
comma-separated, or ``none``), ``OTEL_SERVICE_NAME`` (default ``callgate``),
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER`` and the batch processor's ``OTEL_BSP_*``.
Unlike the SDK's own default, tracing is off unless ``OTEL_TRACES_EXPORTER`` names an exporter.
``config.wsgi``, ``config.asgi``, every Celery pool process and every ``CallgateCommand`` (so an
operation a command starts opens its trace) call :func:`tracing_setup`.
"""

from __future__ import annotations

import hmac
import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from prometheus_client import CONTENT_TYPE_LATEST

from toolcalls.telemetry import metrics, tracing

_EXPORTERS: dict[str, type[SpanExporter]] = {
    "otlp": OTLPSpanExporter,
    "console": ConsoleSpanExporter,
}


def tracing_setup() -> None:
    """Trace this process as the ``OTEL_*`` variables say (a no-op when tracing is off or
    already on). Raises ``ImproperlyConfigured`` for an exporter it does not know."""
    names = [
        name.strip().lower()
        for name in os.environ.get("OTEL_TRACES_EXPORTER", "none").split(",")
        if name.strip().lower() not in ("", "none")
    ]
    if not names or tracing.active():
        return
    unknown = [name for name in names if name not in _EXPORTERS]
    if unknown:
        known = ", ".join([*_EXPORTERS, "none"])
        raise ImproperlyConfigured(f"OTEL_TRACES_EXPORTER: unknown {unknown}; known: {known}")
    service = os.environ.get("OTEL_SERVICE_NAME") or "callgate"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_EXPORTERS[name]()))
    trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument()
    CeleryInstrumentor().instrument()
    tracing.tracer_use(provider.get_tracer("callgate"))


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: every metric in the Prometheus text format
    (:mod:`toolcalls.telemetry.metrics`), for ``Authorization: Bearer
    <CALLGATE_METRICS_TOKEN>``; 401 without it, 404 when no token is set."""
    token = settings.CALLGATE_METRICS_TOKEN
    if not token:
        raise Http404("Metrics are off.")
    given = request.headers.get("Authorization", "").encode()
    if not hmac.compare_digest(given, f"Bearer {token}".encode()):
        return HttpResponse(
            "A bearer token is required.\n",
            status=401,
            content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
