"""The approvals app as the engine sees it: the one port (:class:`ApprovalDesk`) that app
registers at start-up, so the engine imports nothing of it.

Through it the engine opens a request for a parked call, reads back the terms that were approved
(``toolcalls.services.approvals``), and has an ending operation's pending approvals superseded
(``toolcalls.services.transitions``). Each is called inside the engine's step, with the
operation (and the call, if any) locked first: the desk locks its own rows after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from toolcalls.models import ToolCall
from toolcalls.registry import ToolSpec
from toolcalls.services.unit import Step


@dataclass(frozen=True)
class ApprovalTerms:
    """What a human approved, as the approval record holds it now (read under its lock).

    ``approved``: the record is APPROVED with a decision time; times are aware datetimes.
    """

    approved: bool
    decided_at: datetime | None
    expires_at: datetime
    arguments_sha256: str
    schema_version: str
    policy_revision: str


class ApprovalDesk(Protocol):
    """The approvals app, as the engine sees it (registered by its ``AppConfig.ready``)."""

    def open(
        self, step: Step, call: ToolCall, *, spec: ToolSpec, canonical_arguments: str, reason: str
    ) -> None:
        """Record a request for a human decision on ``call``, which just became
        WAITING_APPROVAL, inside ``step`` (operation and call locked)."""

    def terms(self, call: ToolCall) -> ApprovalTerms:
        """Lock the approval of ``call`` and return what it says now."""

    def supersede(self, step: Step, *, ended: str) -> None:
        """The step's operation (locked) is ending in ``ended``, a final state: record its
        pending approvals superseded, inside ``step``, nothing being left to decide."""


_desks: list[ApprovalDesk] = []


def approval_desk_register(desk: ApprovalDesk) -> None:
    """Register the app that records approvals (one per process)."""
    _desks[:] = [desk]


def approval_desk() -> ApprovalDesk:
    """The registered desk."""
    assert _desks, "the approvals app registers its desk at start-up"
    return _desks[0]
