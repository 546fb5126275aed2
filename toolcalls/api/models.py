"""API keys and remembered POST responses (``Idempotency-Key``)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower

from toolcalls.models import Tenant

#: Scopes an API key may hold.
SCOPES = (
    "operations:read",
    "operations:write",
    "approvals:decide",
    "audit:read",
    "tools:manage",
    "agents:read",
    "agents:write",
)


#: The most characters of a key's name.
KEY_NAME_MAX = 100


def new_key_prefix() -> str:
    return secrets.token_hex(6)


class ApiKey(models.Model):
    """A backend service's credential, bound to one tenant and a set of scopes.

    The secret is shown once at creation; only its SHA-256 is stored (it is 256 random bits, so
    a slow hash adds nothing). ``prefix`` finds the row; ``service_user`` is the identity the
    service acts as (operations it starts are requested by it, so four-eyes applies to it).
    ``name`` is what the audit trail calls it (``service:<name>``), so no two keys of a tenant,
    revoked ones included, share it, whatever their letters' case.
    """

    name = models.CharField(max_length=KEY_NAME_MAX)
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
        constraints = [
            models.UniqueConstraint("tenant", Lower("name"), name="api_key_name_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (cg_{self.prefix}…)"


class IdempotentRequest(models.Model):
    """One POST sent with an ``Idempotency-Key``, per API key.

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
