"""The approval record's states and its allowed-transition table.

A transition not listed here is refused (``toolcalls.states.IllegalTransition``, kind
``approval``). The database check constraint and the migrations spell the same values out.
"""

from __future__ import annotations

from django.db import models


class ApprovalState(models.TextChoices):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"


A = ApprovalState
APPROVAL_TRANSITIONS: dict[str, frozenset[str]] = {
    A.PENDING: frozenset({A.APPROVED, A.DENIED, A.EXPIRED}),
    A.APPROVED: frozenset(),
    A.DENIED: frozenset(),
    A.EXPIRED: frozenset(),
}
