"""The approval record's states and its allowed-transition table.

A transition not listed here is refused (``toolcalls.states.IllegalTransition``, kind
``approval``). The database check constraint and the migrations spell the same values out.
A person decides (APPROVED, DENIED); the expiry sweep or a late decision records EXPIRED; the
engine records SUPERSEDED when the operation ends while the approval is still decidable (in the
step that ends it), so nobody can decide it any more.
"""

from __future__ import annotations

from django.db import models


class ApprovalState(models.TextChoices):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"
    SUPERSEDED = "SUPERSEDED"


A = ApprovalState
APPROVAL_TRANSITIONS: dict[str, frozenset[str]] = {
    A.PENDING: frozenset({A.APPROVED, A.DENIED, A.EXPIRED, A.SUPERSEDED}),
    A.APPROVED: frozenset(),
    A.DENIED: frozenset(),
    A.EXPIRED: frozenset(),
    A.SUPERSEDED: frozenset(),
}
