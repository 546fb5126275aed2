"""Thin Celery tasks of the webhook outbox: take IDs, call a service."""

from celery import shared_task

from toolcalls.webhooks import delivery, outbox


@shared_task(name="webhooks.fanout")
def webhook_fanout(event_pk: int) -> None:
    """Create one audit event's webhook deliveries and wake their senders."""
    outbox.webhook_fanout(event_pk=event_pk)


@shared_task(name="webhooks.deliver")
def webhook_deliver(endpoint_pk: int, operation_pk: int) -> None:
    """Send an endpoint's due deliveries of one operation, in audit order."""
    delivery.webhook_deliver(endpoint_pk=endpoint_pk, operation_pk=operation_pk)


@shared_task(name="webhooks.retry_due")
def webhook_retry_due() -> int:
    """Periodic sweep: wake the senders of deliveries whose next attempt is due (database time
    decides, not the broker's countdowns)."""
    return delivery.webhook_retry_due()
