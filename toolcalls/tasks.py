"""Thin Celery tasks: take IDs, call a service, return."""

from celery import shared_task

from toolcalls.services import approvals, execution, reconcile, recovery, turns
from toolcalls.services.enqueue import continuing

# The engine's tasks continue with the work they wake (``enqueue.continuing``).


@shared_task(name="toolcalls.run_turn")
def run_turn(operation_pk: int) -> None:
    """Advance one operation by one model request (``turns.turn_run``)."""
    with continuing():
        turns.turn_run(operation_pk=operation_pk)


@shared_task(name="toolcalls.execute_call")
def execute_call(call_pk: int) -> None:
    """Execute one claimed-to-be-runnable call (``execution.call_execute``)."""
    with continuing():
        execution.call_execute(call_pk=call_pk)


@shared_task(name="toolcalls.resume_call")
def resume_call(call_pk: int) -> None:
    """Revalidate and execute an approved call (``approvals.call_resume``)."""
    with continuing():
        approvals.call_resume(call_pk=call_pk)


@shared_task(name="toolcalls.reconcile_call")
def reconcile_call(call_pk: int) -> None:
    """Ask the downstream system about a lost outcome (``reconcile.call_reconcile``)."""
    with continuing():
        reconcile.call_reconcile(call_pk=call_pk)


@shared_task(name="toolcalls.recovery_sweep")
def recovery_sweep() -> dict[str, int]:
    """Periodic: hand out again what dead workers and lost messages left behind."""
    return recovery.recovery_sweep()
