"""Thin Celery tasks: take IDs, call a service."""

from celery import shared_task

from approvals import services


@shared_task(name="approvals.expire_due")
def expire_due() -> int:
    """Periodic sweep: expire approvals past their deadline (database time)."""
    return services.approvals_expire_due()
