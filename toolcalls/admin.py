"""Support admin for the engine's rows.

Everything but tenants is read-only here: operations, turns, calls, idempotency records and the
audit trail change only through ``toolcalls.services`` (one transition function, one audit
event). Search takes the IDs support is given, exactly (``__exact`` keeps the unique indexes in
use; Django's ``=`` prefix would compare ``UPPER()`` values).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from toolcalls.admin_base import (
    FamilyFilter,
    JsonAdminMixin,
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    SuperuserEditableAdminMixin,
    TenantScopedAdminMixin,
    ToolFilter,
)
from toolcalls.models import (
    AuditEvent,
    IdempotencyRecord,
    ModelTurn,
    Operation,
    ReplayScript,
    Tenant,
    ToolCall,
)

#: A call's raw argument text: up to the stream limit (a megabyte), never shown in a list.
_CALL_RAW_ARGUMENTS = "call__raw_arguments"


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    tenant_lookup = "pk"
    list_display = ("slug", "name", "is_active")
    list_filter = ("is_active",)
    search_fields = ("slug", "name")
    filter_horizontal = ("members",)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Every row of a tenant protects it; deactivate (is_active) instead.
        return False


@admin.register(ReplayScript)
class ReplayScriptAdmin(
    TenantScopedAdminMixin, ReadOnlyAdminMixin, JsonAdminMixin, admin.ModelAdmin
):
    json_fields = ("replies",)
    list_display = ("name", "family", "model", "created_at")
    list_filter = (FamilyFilter, "created_at")
    search_fields = ("name",)

    def scope_to_tenants(self, queryset: QuerySet[Any], tenants: QuerySet[Tenant]) -> QuerySet[Any]:
        # A script belongs to no tenant: staff see the scripts their tenants' operations ran.
        used = Operation.objects.filter(tenant__in=tenants).values("replay_script_id")
        return queryset.filter(pk__in=used)


@admin.register(Operation)
class OperationAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    json_fields = ("conversation", "tool_names", "budgets", "calls_per_tool")
    list_display = (
        "public_id",
        "tenant",
        "state",
        "family",
        "model",
        "transport",
        "turn_count",
        "tool_call_count",
        "requested_by",
        "created_at",
        "updated_at",
    )
    list_select_related = ("tenant", "requested_by")
    list_filter = (
        "state",
        FamilyFilter,
        "transport",
        "created_at",
        "updated_at",
    )
    search_fields = ("public_id__exact", "subject_ref__exact")


@admin.register(ModelTurn)
class ModelTurnAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "operation__tenant"
    json_fields = ("request_body", "reply")
    #: Shown joined, as ``request_body``.
    exclude = ("request_frame", "request_items")
    list_display = (
        "operation__public_id",
        "index",
        "outcome",
        "response_id",
        "family",
        "model",
        "transport",
        "input_tokens",
        "output_tokens",
        "latency_ms",
        "created_at",
    )
    list_select_related = ("operation",)
    list_filter = ("outcome", FamilyFilter, "created_at")
    search_fields = ("response_id__exact", "operation__public_id__exact")


@admin.register(ToolCall)
class ToolCallAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "operation__tenant"
    json_fields = ("arguments", "model_result", "protected_audit")
    changelist_defer = ("raw_arguments",)
    list_display = (
        "public_id",
        "operation__public_id",
        "tool_name",
        "state",
        "provider_call_id",
        "attempt",
        "error_code",
        "created_at",
        "updated_at",
    )
    list_select_related = ("operation",)
    list_filter = ("state", ToolFilter, "provider_call_id_synthesized", "created_at", "updated_at")
    search_fields = (
        "public_id__exact",
        "provider_call_id__exact",
        "response_id__exact",
        "idempotency_key__exact",
        "operation__public_id__exact",
        "approval__public_id__exact",
    )


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    json_fields = ("model_result",)
    changelist_defer = (_CALL_RAW_ARGUMENTS,)
    list_display = (
        "key",
        "tool_name",
        "tenant",
        "state",
        "call__public_id",
        "created_at",
        "updated_at",
    )
    list_select_related = ("tenant", "call")
    list_filter = ("state", ToolFilter, "created_at")
    search_fields = ("key__exact", "call__public_id__exact", "call__operation__public_id__exact")


@admin.register(AuditEvent)
class AuditEventAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "operation__tenant"
    json_fields = ("details",)
    changelist_defer = (_CALL_RAW_ARGUMENTS,)
    list_display = (
        "operation__public_id",
        "seq",
        "kind",
        "call__public_id",
        "approval_ref",
        "actor",
        "from_state",
        "to_state",
        "created_at",
    )
    list_select_related = ("operation", "call")
    list_filter = ("created_at",)
    search_fields = (
        "operation__public_id__exact",
        "call__public_id__exact",
        "call__provider_call_id__exact",
        "approval_ref__exact",
    )
