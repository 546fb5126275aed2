"""Support admin for the API app: keys and remembered requests.

API keys are created with ``manage.py`` (the secret is shown once) and here only read or revoked;
their hash is never shown. Remembered requests are written by services only and are read-only.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from toolcalls.admin_base import (
    JsonAdminMixin,
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    TenantScopedAdminMixin,
)
from toolcalls.api.auth import api_keys_revoke
from toolcalls.api.models import ApiKey, IdempotentRequest


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    fields = (
        "name",
        "tenant",
        "service_user",
        "key_prefix",
        "scopes",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    readonly_fields = fields
    list_display = (
        "name",
        "tenant",
        "key_prefix",
        "scope_list",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_select_related = ("tenant",)
    list_filter = ("revoked_at", "created_at")
    search_fields = ("name", "prefix__exact")
    actions = ["revoke"]

    @admin.display(description="key")
    def key_prefix(self, key: ApiKey) -> str:
        return f"cg_{key.prefix}_…"

    @admin.display(description="scopes")
    def scope_list(self, key: ApiKey) -> str:
        return ", ".join(key.scopes)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("api.change_apikey")

    @admin.action(permissions=["revoke"], description="Revoke the selected API keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        keys = api_keys_revoke(keys=queryset)
        for key in keys:
            self.log_change(request, key, "Revoked.")
        self.message_user(request, f"Revoked {len(keys)} API key(s).", messages.SUCCESS)


@admin.register(IdempotentRequest)
class IdempotentRequestAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "api_key__tenant"
    json_fields = ("response_body",)
    list_display = ("key", "api_key", "state", "response_status", "created_at")
    list_select_related = ("api_key",)
    list_filter = ("state", "created_at")
    search_fields = ("key__exact", "api_key__prefix__exact")
