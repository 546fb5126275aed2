"""Support admin for the webhook outbox: endpoints and their deliveries.

Webhook endpoints are registered and edited here by superusers; deliveries are written by the
outbox only and are read-only here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from toolcalls.admin_base import (
    FixedValuesFilter,
    JsonAdminMixin,
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    SuperuserEditableAdminMixin,
    TenantScopedAdminMixin,
)
from toolcalls.webhooks.endpoints import webhook_url_refusal
from toolcalls.webhooks.models import WebhookDelivery, WebhookEndpoint
from toolcalls.webhooks.outbox import EVENT_TYPES


class WebhookEndpointForm(forms.ModelForm):
    url = forms.URLField(max_length=500, assume_scheme="https")
    events = forms.MultipleChoiceField(
        choices=[(t, t) for t in EVENT_TYPES.values()],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every event.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = ("tenant", "url", "events", "is_active")

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        refusal = webhook_url_refusal(url)
        if refusal is not None:
            raise forms.ValidationError(refusal)
        return url


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(TenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    form = WebhookEndpointForm
    list_display = ("url", "tenant", "event_list", "is_active", "created_at")
    list_select_related = ("tenant",)
    list_filter = ("is_active", "created_at")
    search_fields = ("url",)

    @admin.display(description="events")
    def event_list(self, endpoint: WebhookEndpoint) -> str:
        return ", ".join(endpoint.events) or "all"

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        fields = ("tenant", "url", "events", "is_active")
        if obj is None:
            return fields  # the secret is made when the row is saved
        # The signing secret: for the superusers who hand it to the receiver's owner.
        return (*fields, *(("secret",) if request.user.is_superuser else ()), "created_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("secret", "created_at")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Its deliveries protect an endpoint; deactivate it (is_active) instead.
        return False


class EventTypeFilter(FixedValuesFilter):
    title = "event type"
    parameter_name = "event_type"

    def values(self) -> Iterable[str]:
        return EVENT_TYPES.values()


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "endpoint__tenant"
    json_fields = ("payload",)
    changelist_defer = ("last_error",)
    list_display = (
        "pk",
        "event_type",
        "event__operation__public_id",
        "event__seq",
        "endpoint",
        "state",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "delivered_at",
        "created_at",
    )
    list_select_related = ("endpoint", "event__operation")
    list_filter = ("state", EventTypeFilter, "created_at")
    search_fields = ("event__operation__public_id__exact", "endpoint__url__exact")
