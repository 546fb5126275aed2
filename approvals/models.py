"""ApprovalRequest: one human decision record on one parked call (docs/design.md §9)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Case, ExpressionWrapper, F, Value, When
from django.db.models.functions import Coalesce, Now
from django.utils import timezone

from approvals.states import ApprovalState
from toolcalls.ids import new_approval_id
from toolcalls.models import Operation, Tenant, ToolCall

#: Approvals someone can still decide: PENDING (past its expiry it shows EXPIRED until the sweep
#: records it, :data:`EXPIRED_NOW`). When its operation ends, the engine records a PENDING one
#: SUPERSEDED in the same transaction, so the state alone says it: no operation is read.
DECIDABLE = models.Q(state=ApprovalState.PENDING)
#: PENDING, but past its expiry or its operation's deadline (database time): expired, whether
#: or not the sweep has recorded it yet (:attr:`ApprovalRequest.expired_now` as a condition).
EXPIRED_NOW = models.Q(state=ApprovalState.PENDING) & (
    models.Q(expires_at__lte=Now()) | models.Q(operation__deadline_at__lte=Now())
)
#: :attr:`ApprovalRequest.shown_state` as a query expression: EXPIRED as soon as
#: :data:`EXPIRED_NOW`, else the recorded state.
SHOWN_STATE = Case(
    When(EXPIRED_NOW, then=Value(ApprovalState.EXPIRED.value)),
    default=F("state"),
    output_field=models.CharField(),
)
#: :attr:`ApprovalRequest.superseded` as a query expression: recorded SUPERSEDED.
SUPERSEDED = ExpressionWrapper(
    models.Q(state=ApprovalState.SUPERSEDED), output_field=models.BooleanField()
)


def own_by(*, requested_by_id: int, started_by_id: int | None, user_pk: int) -> str | None:
    """Four eyes: why an approval is the user ``user_pk``'s own, so another operator must decide
    it: ``"request"`` when they requested the call, ``"fork"`` when they started (forked) its
    operation; ``None`` when neither. :func:`own` is the same rule as a query condition."""
    if requested_by_id == user_pk:
        return "request"
    if started_by_id == user_pk:
        return "fork"
    return None


def own(user_pk: int) -> models.Q:
    """The approvals :func:`own_by` names the user ``user_pk``'s own, as a query condition
    (excluded: a fork's NULL starter is nobody's, as Django negates a nullable column)."""
    return models.Q(requested_by=user_pk) | models.Q(operation__started_by=user_pk)


#: Sort keys of the queue (indexed below): the amount with "none" last, and the risk class from
#: irreversible (2) to read (0).
AMOUNT = Coalesce("amount_cents", Value(-1))
RISK_RANK = Case(
    When(risk="irreversible", then=Value(2)), When(risk="write", then=Value(1)), default=Value(0)
)


class ApprovalRequest(models.Model):
    """What the operator decides on, frozen at request time.

    ``canonical_arguments`` and ``arguments_sha256`` are the RFC 8785 form and its SHA-256 at the
    moment the call was parked; resume executes only if the call's arguments still hash to it.
    """

    public_id = models.CharField(max_length=40, unique=True, default=new_approval_id)
    call = models.OneToOneField(ToolCall, on_delete=models.PROTECT, related_name="approval")
    operation = models.ForeignKey(Operation, on_delete=models.PROTECT, related_name="approvals")
    tenant = models.ForeignKey(  # indexed first in approval_tenant_queue and the like
        Tenant, on_delete=models.PROTECT, related_name="approvals", db_index=False
    )
    tool_name = models.CharField(max_length=200)
    risk = models.CharField(max_length=20)
    canonical_arguments = models.TextField()
    arguments_sha256 = models.CharField(max_length=64)
    amount_cents = models.BigIntegerField(
        null=True, blank=True, help_text="The money amount, when the tool names one."
    )
    summary = models.JSONField(
        default=list,
        blank=True,
        help_text="What the call means to people: the tool's summary as [field, value] pairs.",
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
            models.Index(
                fields=["tenant", "state", "created_at", "id"], name="approval_tenant_age"
            ),
            models.Index(
                F("tenant"), F("state"), AMOUNT.desc(), F("id"), name="approval_tenant_amount"
            ),
            models.Index(
                F("tenant"),
                F("state"),
                RISK_RANK.desc(),
                F("expires_at"),
                F("id"),
                name="approval_tenant_risk",
            ),
            models.Index(fields=["tenant", "-decided_at", "-id"], name="approval_tenant_decided"),
        ]

    def __str__(self) -> str:
        return self.public_id

    @property
    def decidable_until(self) -> datetime:
        """Its expiry, or its operation's deadline when that is sooner (an approval opened
        before the deadline bounded its expiry may outlive the deadline; the deadline still
        wins). Reads ``operation``."""
        deadline = self.operation.deadline_at
        return min(self.expires_at, deadline) if deadline else self.expires_at

    @property
    def expired_now(self) -> bool:
        """Still PENDING but past :attr:`decidable_until` by this server's clock: expired,
        whether or not the sweep has recorded it yet. Reads ``operation``."""
        return self.state == ApprovalState.PENDING and timezone.now() >= self.decidable_until

    @property
    def shown_state(self) -> str:
        """The state people see: EXPIRED as soon as :attr:`expired_now`."""
        return ApprovalState.EXPIRED if self.expired_now else self.state

    @property
    def superseded(self) -> bool:
        """Recorded SUPERSEDED: its operation ended while it could still be decided (the step
        that ended it recorded it, ``decided_at`` then), so nothing is left to decide."""
        return self.state == ApprovalState.SUPERSEDED
