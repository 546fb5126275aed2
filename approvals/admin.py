"""Support admin for approval requests: read-only, since deciding goes through
``approvals.services`` (four-eyes rule, digest and expiry checks, resume) from the console."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib import admin

from approvals.models import ApprovalRequest
from toolcalls.admin_base import (
    FixedValuesFilter,
    JsonAdminMixin,
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    TenantScopedAdminMixin,
    ToolFilter,
)
from toolcalls.registry import RISKS


class RiskFilter(FixedValuesFilter):
    title = "risk"
    parameter_name = "risk"

    def values(self) -> Iterable[str]:
        return RISKS


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(
    TenantScopedAdminMixin,
    ReadOnlyAdminMixin,
    LargeTableAdminMixin,
    JsonAdminMixin,
    admin.ModelAdmin,
):
    changelist_defer = ("canonical_arguments",)
    list_display = (
        "public_id",
        "operation__public_id",
        "tenant",
        "tool_name",
        "risk",
        "state",
        "requested_by",
        "decided_by",
        "created_at",
        "expires_at",
    )
    list_select_related = ("operation", "tenant", "requested_by", "decided_by")
    list_filter = (
        "state",
        ToolFilter,
        RiskFilter,
        "created_at",
        "expires_at",
        "decided_at",
    )
    search_fields = (
        "public_id__exact",
        "operation__public_id__exact",
        "call__public_id__exact",
        "call__provider_call_id__exact",
    )
