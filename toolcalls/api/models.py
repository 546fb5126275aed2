"""API keys, remembered POST responses (``Idempotency-Key``), and webhook endpoints and
deliveries."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from toolcalls.models import AuditEvent, Tenant

#: Scopes an API key may hold.
SCOPES = ("operations:read", "operations:write", "approvals:decide", "audit:read")


def new_key_prefix() -> str:
    return secrets.token_hex(6)


class ApiKey(models.Model):
    """A backend service's credential, bound to one tenant and a set of scopes.

    The secret is shown once at creation; only its SHA-256 is stored (it is 256 random bits, so
    a slow hash adds nothing). ``prefix`` finds the row; ``service_user`` is the identity the
    service acts as (operations it starts are requested by it, so four-eyes applies to it).
    """

    name = models.CharField(max_length=100)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="api_keys")
    service_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="api_keys"
    )
    prefix = models.CharField(max_length=12, unique=True, default=new_key_prefix)
    key_sha256 = models.CharField(max_length=64)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} (cg_{self.prefix}…)"


class IdempotentRequest(models.Model):
    """One POST sent with an ``Idempotency-Key``: Stripe semantics per API key.

    Same key and same request: the stored response again. Same key, different request: 409.
    Still in flight: 409.
    """

    class State(models.TextChoices):
        IN_FLIGHT = "IN_FLIGHT"
        DONE = "DONE"

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    request_sha256 = models.CharField(max_length=64)
    state = models.CharField(max_length=20, choices=State.choices, default=State.IN_FLIGHT)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["api_key", "key"], name="idempotent_request_key"),
        ]

    def __str__(self) -> str:
        return self.key


class WebhookEndpoint(models.Model):
    """Where a tenant's service wants events: operation state changes, approvals requested and
    decided. Each delivery is signed with ``secret`` (HMAC-SHA256 over timestamp + body)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="webhook_endpoints")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=100, default=secrets.token_hex)
    events = models.JSONField(default=list, help_text="Event types; empty means all.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

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
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event"], name="webhook_delivery_once"),
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="webhook_due")]

    def __str__(self) -> str:
        return f"{self.event_type} → {self.endpoint_id}"
