"""Keep ``Tenant.webhooks_active`` true exactly when the tenant has an active endpoint.

Connected in :meth:`toolcalls.webhooks.apps.WebhooksConfig.ready`, so every save and delete of an
endpoint (the API, the admin, a shell) refreshes it in the same transaction.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from toolcalls.models import Tenant
from toolcalls.webhooks.models import WebhookEndpoint


def tenant_webhooks_refresh(*, tenant_id: int) -> bool:
    """Recompute the tenant's ``webhooks_active`` flag; returns it.

    The tenant row is locked first, so two endpoint changes of one tenant refresh one after
    the other and the later one reads the earlier one's committed result.
    """
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant_id).exists()
        active = WebhookEndpoint.objects.filter(tenant_id=tenant_id, is_active=True).exists()
        Tenant.objects.filter(pk=tenant_id).update(webhooks_active=active)
    return active


def _endpoint_changed(sender: type[WebhookEndpoint], instance: WebhookEndpoint, **_: Any) -> None:
    tenant_webhooks_refresh(tenant_id=instance.tenant_id)


def connect() -> None:
    """Refresh the flag after every save and delete of an endpoint."""
    from django.db.models.signals import post_delete, post_save

    post_save.connect(_endpoint_changed, sender=WebhookEndpoint, dispatch_uid="webhooks-active")
    post_delete.connect(_endpoint_changed, sender=WebhookEndpoint, dispatch_uid="webhooks-active")
