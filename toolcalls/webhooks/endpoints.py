"""Registering a tenant's webhook endpoint (the admin's form checks the same rules)."""

from __future__ import annotations

from collections.abc import Sequence

from toolcalls.addresses import UrlRefused
from toolcalls.errors import CallgateError
from toolcalls.models import Tenant
from toolcalls.webhooks.addresses import webhook_url_check
from toolcalls.webhooks.models import WebhookEndpoint
from toolcalls.webhooks.outbox import EVENT_TYPES


def webhook_endpoint_create(
    *, tenant: Tenant, url: str, events: Sequence[str] = ()
) -> WebhookEndpoint:
    """A new active endpoint of ``tenant`` for ``events`` (webhook event types; none: every
    one), with a new signing secret (``endpoint.secret``). Raises ``CallgateError``
    ``invalid_request`` for an unknown event type or a URL that may not be called
    (:func:`webhook_url_check`); a host that does not resolve yet is accepted, as its
    deliveries retry."""
    unknown = sorted(set(events) - set(EVENT_TYPES.values()))
    if unknown:
        known = ", ".join(sorted(EVENT_TYPES.values()))
        raise CallgateError(
            "invalid_request", f"unknown event types: {', '.join(unknown)}; known: {known}"
        )
    if len(url) > WebhookEndpoint._meta.get_field("url").max_length:  # type: ignore[operator]
        raise CallgateError("invalid_request", "the URL is longer than 500 characters")
    refusal = webhook_url_refusal(url)
    if refusal is not None:
        raise CallgateError("invalid_request", refusal)
    return WebhookEndpoint.objects.create(tenant=tenant, url=url, events=sorted(set(events)))


def webhook_url_refusal(url: str) -> str | None:
    """Why ``url`` may not be registered (:func:`webhook_url_check`), or ``None``. A host that
    does not resolve yet is accepted: its deliveries retry and record the error."""
    try:
        webhook_url_check(url)
    except UrlRefused as exc:
        return str(exc)
    except OSError:
        pass
    return None
