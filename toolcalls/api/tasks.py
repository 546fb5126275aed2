"""Thin Celery tasks of the API app: take IDs, call a service (``toolcalls.api.webhooks``)."""

from celery import shared_task

from toolcalls.api import webhooks


@shared_task(name="api.webhook_fanout")
def webhook_fanout(event_pk: int) -> None:
    """Create one audit event's webhook deliveries and wake their senders."""
    webhooks.webhook_fanout(event_pk=event_pk)


@shared_task(name="api.webhook_deliver")
def webhook_deliver(endpoint_pk: int, operation_pk: int) -> None:
    """Send an endpoint's due deliveries of one operation, in audit order."""
    webhooks.webhook_deliver(endpoint_pk=endpoint_pk, operation_pk=operation_pk)


@shared_task(name="api.webhook_retry_due")
def webhook_retry_due() -> int:
    """Periodic sweep: wake the senders of deliveries whose next attempt is due (database time
    decides, not the broker's countdowns)."""
    return webhooks.webhook_retry_due()
