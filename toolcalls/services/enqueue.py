"""Wake-ups for workers, sent only after the transaction that made the work visible commits.

The database is the source of truth: a lost message delays work, it never loses it. So every
wake-up is registered ``robust``: a broker that refuses it (or, in-process, a task that fails)
is logged and leaves the committed work for the recovery sweep, instead of turning a committed
request into an error that a client would retry.
"""

from __future__ import annotations

from django.db import transaction


def enqueue_turn(*, operation_pk: int, countdown_s: float | None = None) -> None:
    """Run ``toolcalls.run_turn`` for the operation after commit (optionally delayed, seconds)."""
    from toolcalls import tasks

    transaction.on_commit(
        lambda: tasks.run_turn.apply_async(args=[operation_pk], countdown=countdown_s),
        robust=True,
    )


def enqueue_execute(*, call_pk: int, countdown_s: float | None = None) -> None:
    """Run ``toolcalls.execute_call`` for the call after commit."""
    from toolcalls import tasks

    transaction.on_commit(
        lambda: tasks.execute_call.apply_async(args=[call_pk], countdown=countdown_s),
        robust=True,
    )


def enqueue_reconcile(*, call_pk: int) -> None:
    """Run ``toolcalls.reconcile_call`` for a call whose outcome is unknown, after commit."""
    from toolcalls import tasks

    transaction.on_commit(lambda: tasks.reconcile_call.apply_async(args=[call_pk]), robust=True)
