"""Where tenants want events, and every delivery of an event with its attempts."""

from __future__ import annotations

import secrets

from django.db import models

from toolcalls.models import AuditEvent, Tenant


class WebhookEndpoint(models.Model):
    """Where a tenant's service wants events: operation state changes, approvals requested and
    decided. Each delivery is signed with ``secret`` (HMAC-SHA256 over timestamp + body)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="webhook_endpoints")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=100, default=secrets.token_hex)
    events = models.JSONField(default=list, help_text="Event types; empty means all.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        # Tables created by the API app, whose part these models were.
        db_table = "api_webhookendpoint"

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event for one endpoint, with every attempt's outcome. Deliveries to an endpoint are
    sent in audit order per operation."""

    class State(models.TextChoices):
        PENDING = "PENDING"
        DELIVERED = "DELIVERED"
        FAILED = "FAILED"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.PROTECT, related_name="deliveries"
    )
    event = models.ForeignKey(AuditEvent, on_delete=models.PROTECT, related_name="+")
    event_type = models.CharField(max_length=60)
    payload = models.JSONField()
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "api_webhookdelivery"
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event"], name="webhook_delivery_once"),
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="webhook_due")]

    def __str__(self) -> str:
        return f"{self.event_type} → {self.endpoint_id}"
