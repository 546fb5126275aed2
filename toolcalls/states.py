"""State enums and the explicit allowed-transition tables (docs/design.md §3).

A transition not listed here is refused by ``toolcalls.services.transitions``; nothing else in
the code base writes a ``state`` field.
"""

from __future__ import annotations

from django.db import models

from toolcalls.errors import CallgateError


class OperationState(models.TextChoices):
    PENDING = "PENDING"
    MODEL_REQUESTED = "MODEL_REQUESTED"
    VALIDATING = "VALIDATING"
    EXECUTING = "EXECUTING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    RESULTS_READY = "RESULTS_READY"
    ESCALATED = "ESCALATED"
    COMPLETED = "COMPLETED"
    REFUSED = "REFUSED"
    INCOMPLETE = "INCOMPLETE"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    CANCELLED = "CANCELLED"


class CallState(models.TextChoices):
    PROPOSED = "PROPOSED"
    REJECTED = "REJECTED"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"
    EXECUTING = "EXECUTING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN_OUTCOME = "UNKNOWN_OUTCOME"
    SUPPRESSED = "SUPPRESSED"


Op = OperationState
_NON_TERMINAL = (
    Op.PENDING,
    Op.MODEL_REQUESTED,
    Op.VALIDATING,
    Op.EXECUTING,
    Op.WAITING_APPROVAL,
    Op.RESULTS_READY,
    Op.ESCALATED,
)

# Every non-terminal state may be cancelled; every state the loop runs in may escalate when a
# guard trips or fail on an internal invariant (binding mismatch, malformed reply).
OPERATION_TRANSITIONS: dict[str, frozenset[str]] = {
    Op.PENDING: frozenset({Op.MODEL_REQUESTED, Op.CANCELLED}),
    Op.MODEL_REQUESTED: frozenset(
        {
            Op.COMPLETED,
            Op.VALIDATING,
            Op.REFUSED,
            Op.INCOMPLETE,
            Op.MODEL_REQUESTED,  # paused turn, or a retryable API failure after backoff
            Op.FAILED,
            Op.ESCALATED,
            Op.CANCELLED,
        }
    ),
    Op.VALIDATING: frozenset(
        {Op.EXECUTING, Op.WAITING_APPROVAL, Op.RESULTS_READY, Op.ESCALATED, Op.CANCELLED}
    ),
    Op.EXECUTING: frozenset(
        {Op.RESULTS_READY, Op.WAITING_APPROVAL, Op.ESCALATED, Op.FAILED, Op.CANCELLED}
    ),
    Op.WAITING_APPROVAL: frozenset(
        {Op.EXECUTING, Op.RESULTS_READY, Op.ESCALATED, Op.FAILED, Op.CANCELLED}
    ),
    Op.RESULTS_READY: frozenset({Op.MODEL_REQUESTED, Op.FAILED, Op.ESCALATED, Op.CANCELLED}),
    # A human extends a budget (back to where it stopped) or resolves an unknown outcome (the
    # call set goes on), or stops it.
    Op.ESCALATED: frozenset(
        {
            Op.RESULTS_READY,
            Op.MODEL_REQUESTED,
            Op.EXECUTING,
            Op.WAITING_APPROVAL,
            Op.STOPPED,
            Op.CANCELLED,
        }
    ),
    Op.COMPLETED: frozenset(),
    Op.REFUSED: frozenset(),
    Op.INCOMPLETE: frozenset(),
    Op.FAILED: frozenset(),
    Op.STOPPED: frozenset(),
    Op.CANCELLED: frozenset(),
}

OPERATION_TERMINAL = frozenset(s for s, targets in OPERATION_TRANSITIONS.items() if not targets)
OPERATION_ACTIVE = frozenset(_NON_TERMINAL)
#: The states in which a call of the operation may be waiting for a person (its approval
#: PENDING): while its call set is validated, run or parked, or escalated from one of those. In
#: the others (PENDING, MODEL_REQUESTED, RESULTS_READY) every call has its result, since a set is
#: settled before the next model request: an operation ending from them (COMPLETED, REFUSED and
#: INCOMPLETE always do, from MODEL_REQUESTED) has no approval left to supersede.
OPERATION_MAY_WAIT = frozenset({Op.VALIDATING, Op.EXECUTING, Op.WAITING_APPROVAL, Op.ESCALATED})

C = CallState
CALL_TRANSITIONS: dict[str, frozenset[str]] = {
    C.PROPOSED: frozenset({C.REJECTED, C.WAITING_APPROVAL, C.EXECUTING, C.SUPPRESSED}),
    C.WAITING_APPROVAL: frozenset({C.APPROVED, C.DENIED, C.EXPIRED}),
    # Resume revalidates an approved call; a failed check rejects it without running it.
    C.APPROVED: frozenset({C.EXECUTING, C.REJECTED, C.SUPPRESSED}),
    # Back to PROPOSED: a read-only tool retried after a crash or timeout, or a side effect the
    # reconciler found not applied (retried under the same idempotency key).
    C.EXECUTING: frozenset({C.SUCCEEDED, C.FAILED, C.UNKNOWN_OUTCOME, C.PROPOSED}),
    C.UNKNOWN_OUTCOME: frozenset({C.SUCCEEDED, C.FAILED, C.PROPOSED}),
    C.REJECTED: frozenset(),
    C.DENIED: frozenset(),
    C.EXPIRED: frozenset(),
    C.SUCCEEDED: frozenset(),
    C.FAILED: frozenset(),
    C.SUPPRESSED: frozenset(),
}

#: Call states that carry the call's one result envelope.
CALL_FINISHED = frozenset(s for s, targets in CALL_TRANSITIONS.items() if not targets)


class IllegalTransition(CallgateError):
    """A transition not in its table (``illegal_transition``). ``kind``: ``operation``,
    ``call`` or ``approval``."""

    def __init__(self, kind: str, from_state: str, to_state: str) -> None:
        message = f"illegal {kind} transition {from_state} -> {to_state}"
        super().__init__(
            "illegal_transition", message, details={"from": from_state, "to": to_state}
        )
        self.kind = kind
        self.from_state = from_state
        self.to_state = to_state


def check_transition(table: dict[str, frozenset[str]], kind: str, from_state: str, to: str) -> None:
    """Raise :class:`IllegalTransition` unless ``from_state -> to`` is in ``table``."""
    if to not in table.get(from_state, frozenset()):
        raise IllegalTransition(kind, from_state, to)


class AuditKind(models.TextChoices):
    """What an audit event records (``AuditEvent.kind``); webhooks carry some of them."""

    OPERATION_CREATED = "operation.created"
    #: A follow-up operation was started from this ended one (``details.follow_up``).
    OPERATION_FOLLOWED_UP = "operation.followed_up"
    OPERATION_TRANSITION = "operation.transition"
    CALL_PROPOSED = "call.proposed"
    CALL_TRANSITION = "call.transition"
    CALL_KEY_IN_FLIGHT = "call.key_in_flight"
    CALL_STALE_RESULT_REFUSED = "call.stale_result_refused"
    TURN_STALE_REPLY_REFUSED = "turn.stale_reply_refused"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_TRANSITION = "approval.transition"
    APPROVAL_ARGUMENTS_EDITED = "approval.arguments_edited"
    RECOVERY_TURN_LEASE_EXPIRED = "recovery.turn_lease_expired"
    RECOVERY_REQUEUED = "recovery.requeued"
    RECOVERY_CALL_LEASE_EXPIRED = "recovery.call_lease_expired"
    RECOVERY_CALL_REQUEUED = "recovery.call_requeued"
    OPERATION_BODIES_PRUNED = "operation.bodies_pruned"
