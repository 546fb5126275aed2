"""Thin Celery tasks: take IDs, call a service."""

from celery import shared_task

from approvals import resume, services


@shared_task(name="approvals.resume_operation")
def resume_operation(call_pk: int) -> None:
    """Revalidate and execute an approved call (``approvals.resume.approval_resume``)."""
    resume.approval_resume(call_pk=call_pk)


@shared_task(name="approvals.expire_due")
def expire_due() -> int:
    """Periodic sweep: expire approvals past their deadline (database time)."""
    return services.approvals_expire_due()
