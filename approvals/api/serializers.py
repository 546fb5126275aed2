"""Approval shapes for the API."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from approvals.models import ApprovalRequest


class ApprovalSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="public_id")
    operation = serializers.CharField(source="operation.public_id")
    provider_call_id = serializers.CharField(source="call.provider_call_id")
    tool = serializers.CharField(source="tool_name")
    arguments = serializers.SerializerMethodField()
    original_arguments = serializers.SerializerMethodField()
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    superseded = serializers.BooleanField(
        read_only=True,
        help_text="Still PENDING, but its operation ended: it can no longer be decided.",
    )

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "state",
            "superseded",
            "operation",
            "provider_call_id",
            "tool",
            "risk",
            "arguments",
            "arguments_sha256",
            "original_arguments",
            "amount_cents",
            "reason",
            "schema_version",
            "policy_revision",
            "requested_by",
            "created_at",
            "expires_at",
            "decided_by",
            "decided_at",
            "decision_reason",
        ]

    def get_arguments(self, approval: ApprovalRequest) -> dict[str, Any]:
        return json.loads(approval.canonical_arguments)

    def get_original_arguments(self, approval: ApprovalRequest) -> dict[str, Any] | None:
        """The model's arguments when an operator edited them; ``null`` otherwise."""
        return json.loads(approval.original_arguments) if approval.original_arguments else None


class DecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    reason = serializers.CharField(max_length=1000, required=False, default="", allow_blank=True)
    arguments = serializers.DictField(
        required=False, help_text="Approve only: replaces the call's arguments (validated again)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["decision"] == "deny" and "arguments" in attrs:
            raise serializers.ValidationError({"arguments": "only an approval may edit them"})
        return attrs
