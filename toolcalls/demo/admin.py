"""Admin for the demo shop. Orders are the shop's catalogue and faults are test switches, so
superusers may edit both; drafts and the ledger are written by the refund tools only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from toolcalls.admin_base import (
    ReadOnlyAdminMixin,
    SuperuserEditableAdminMixin,
    TenantScopedAdminMixin,
)
from toolcalls.demo.models import Fault, LedgerEntry, Order, RefundDraft


class DemoTenantScopedAdminMixin(TenantScopedAdminMixin):
    """Demo rows name their tenant by slug (``tenant_ref``), not by foreign key."""

    tenant_lookup = "tenant_ref"
    tenant_key = "slug"


@admin.register(Order)
class OrderAdmin(DemoTenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    list_display = (
        "order_id",
        "tenant_ref",
        "customer_ref",
        "description",
        "total_cents",
        "refunded_cents",
        "currency",
    )
    list_filter = ("tenant_ref",)
    search_fields = ("order_id", "customer_ref")
    # Refunds move it, together with a ledger entry; editing it alone would break that pairing.
    readonly_fields = ("refunded_cents",)


@admin.register(RefundDraft)
class RefundDraftAdmin(DemoTenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    tenant_lookup = "order__tenant_ref"
    list_display = ("draft_id", "order", "amount_cents", "reason", "status", "created_at")
    list_select_related = ("order",)
    list_filter = ("status", "created_at")
    search_fields = ("draft_id", "idempotency_key", "order__order_id")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(DemoTenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    tenant_lookup = "order__tenant_ref"
    list_display = (
        "refund_id",
        "order",
        "amount_cents",
        "idempotency_key",
        "operation_ref",
        "call_ref",
        "created_at",
    )
    list_select_related = ("order",)
    list_filter = ("created_at",)
    search_fields = ("refund_id", "idempotency_key", "operation_ref", "call_ref", "order__order_id")


@admin.register(Fault)
class FaultAdmin(SuperuserEditableAdminMixin, admin.ModelAdmin):
    list_display = ("point", "delay_ms", "times")
    search_fields = ("point",)

    # Faults belong to no tenant and steer every handler: superusers only, even to view.
    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser
