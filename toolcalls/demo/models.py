"""The demo shop's own data: orders, refund drafts, and the ledger of refunds actually paid.

Every row names its tenant (``tenant_ref``, the tenant's slug; a draft's and a ledger entry's are
their order's), and IDs are unique per tenant: two tenants may both have an ``ORD-1001`` and each
its own first draft ``RD-ORD-1001-1``.

The ledger has no uniqueness on the idempotency key on purpose: a double refund must be visible
as two rows, not hidden by a constraint.
"""

from django.db import models


class Order(models.Model):
    tenant_ref = models.SlugField()
    order_id = models.CharField(max_length=40)
    customer_ref = models.CharField(max_length=100)
    description = models.CharField(max_length=200)
    total_cents = models.PositiveIntegerField()
    refunded_cents = models.PositiveIntegerField(default=0)
    currency = models.CharField(max_length=3, default="USD")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant_ref", "order_id"], name="demo_order_unique"),
            models.CheckConstraint(
                condition=models.Q(refunded_cents__lte=models.F("total_cents")),
                name="demo_order_refund_within_total",
            ),
        ]

    def __str__(self) -> str:
        return self.order_id

    @property
    def refundable_cents(self) -> int:
        return self.total_cents - self.refunded_cents


class RefundDraft(models.Model):
    class Status(models.TextChoices):
        OPEN = "OPEN"
        SUBMITTED = "SUBMITTED"

    tenant_ref = models.SlugField()
    draft_id = models.CharField(max_length=60)
    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="drafts")
    amount_cents = models.PositiveIntegerField()
    reason = models.CharField(max_length=40)
    idempotency_key = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant_ref", "draft_id"], name="demo_draft_unique"),
        ]

    def __str__(self) -> str:
        return self.draft_id


class LedgerEntry(models.Model):
    """One refund paid out. ``operation_ref`` / ``call_ref`` say which operation caused it."""

    tenant_ref = models.SlugField()
    refund_id = models.CharField(max_length=60)
    order = models.ForeignKey(Order, on_delete=models.PROTECT, related_name="ledger")
    draft = models.ForeignKey(RefundDraft, on_delete=models.PROTECT, related_name="ledger")
    amount_cents = models.PositiveIntegerField()
    idempotency_key = models.CharField(max_length=200)
    operation_ref = models.CharField(max_length=40)
    call_ref = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "ledger entries"
        constraints = [
            models.UniqueConstraint(fields=["tenant_ref", "refund_id"], name="demo_refund_unique"),
        ]

    def __str__(self) -> str:
        return self.refund_id


class Fault(models.Model):
    """A fault to inject at a named point of a demo handler (tests only; read only when
    ``CALLGATE_DEMO_FAULTS`` is on). ``delay_ms`` is slept at the point, ``times`` times."""

    point = models.CharField(max_length=100, unique=True)
    delay_ms = models.PositiveIntegerField(default=0)
    times = models.PositiveIntegerField(default=1)

    def __str__(self) -> str:
        return f"{self.point} (+{self.delay_ms} ms, {self.times}x)"
