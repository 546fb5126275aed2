"""ApprovalRequest: one human decision record on one parked call (DESIGN.md §9)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from approvals.states import ApprovalState
from toolcalls.ids import new_approval_id
from toolcalls.models import Operation, Tenant, ToolCall
from toolcalls.states import OPERATION_ACTIVE

#: Approvals someone can still decide: PENDING, of an operation that has not ended. A PENDING one
#: of an ended operation is *superseded* (derived, never stored: the row stays as it was asked).
DECIDABLE = models.Q(state=ApprovalState.PENDING, operation__state__in=OPERATION_ACTIVE)


class ApprovalRequest(models.Model):
    """What the operator decides on, frozen at request time.

    ``canonical_arguments`` and ``arguments_sha256`` are the RFC 8785 form and its SHA-256 at the
    moment the call was parked; resume executes only if the call's arguments still hash to it.
    """

    public_id = models.CharField(max_length=40, unique=True, default=new_approval_id)
    call = models.OneToOneField(ToolCall, on_delete=models.PROTECT, related_name="approval")
    operation = models.ForeignKey(Operation, on_delete=models.PROTECT, related_name="approvals")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="approvals")
    tool_name = models.CharField(max_length=200)
    risk = models.CharField(max_length=20)
    canonical_arguments = models.TextField()
    arguments_sha256 = models.CharField(max_length=64)
    amount_cents = models.BigIntegerField(
        null=True, blank=True, help_text="The money amount, when the tool names one."
    )
    original_arguments = models.TextField(
        blank=True, help_text="The model's arguments when an operator edited them."
    )
    original_sha256 = models.CharField(max_length=64, blank=True)
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    schema_version = models.CharField(max_length=80)
    policy_revision = models.CharField(max_length=200)
    reason = models.CharField(max_length=500, help_text="Why the policy asks for approval.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    state = models.CharField(
        max_length=20, choices=ApprovalState.choices, default=ApprovalState.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=ApprovalState.values), name="approval_state_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(state=ApprovalState.PENDING)
                | models.Q(decided_at__isnull=False),
                name="approval_decided_has_time",
            ),
        ]
        permissions = [("decide_approvalrequest", "Can approve or deny approval requests")]
        indexes = [
            models.Index(fields=["state", "expires_at", "id"], name="approval_queue"),
            models.Index(
                fields=["tenant", "state", "expires_at", "id"], name="approval_tenant_queue"
            ),
            models.Index(
                fields=["state", "tool_name", "expires_at", "id"], name="approval_tool_queue"
            ),
        ]

    def __str__(self) -> str:
        return self.public_id

    @property
    def superseded(self) -> bool:
        """Still PENDING, but its operation ended: nothing is left to decide (see
        :data:`DECIDABLE`). Reads ``operation``: select it with the approval."""
        return self.state == ApprovalState.PENDING and self.operation.state not in OPERATION_ACTIVE
