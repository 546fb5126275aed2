"""Approval shapes for the API."""

from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from toolcalls.api.serializers import NullForBlank, OptionalText, StrictSerializer


class ApprovalSerializer(NullForBlank):
    """One approval: the call it parks, its arguments and their digest, why it needs a
    decision, and the decision once made."""

    # Rows come from ``approvals.api.views._Approvals.approvals``: its annotations name the
    # operation, the call and the people, so no related row is read into an instance.

    id = serializers.CharField(source="public_id")
    state = serializers.ChoiceField(
        ApprovalState.choices,
        source="state_shown",
        read_only=True,
        help_text="EXPIRED as soon as it is past expires_at or its operation's deadline, before "
        "the expiry sweep records it (decided_at is null until then). SUPERSEDED: its operation "
        "ended while it could still be decided (decided_at is when; decided_by is null).",
    )
    operation = serializers.CharField(source="operation_public_id")
    call = serializers.CharField(
        source="call_public_id", help_text="Callgate's ID of the call (tc_…) this approval parks."
    )
    provider_call_id = serializers.CharField()
    tool = serializers.CharField(source="tool_name")
    arguments = serializers.SerializerMethodField()
    original_arguments = serializers.SerializerMethodField()
    requested_by = serializers.CharField(
        source="requested_by_name",
        read_only=True,
        help_text="Who started the operation, as the audit trail names them: service:<API key "
        "name> or user:<username>.",
    )
    decided_by = serializers.CharField(
        source="decided_by_name",
        read_only=True,
        allow_null=True,
        help_text="Who decided, named as requested_by is; null while undecided.",
    )
    superseded = serializers.BooleanField(
        source="is_superseded",
        read_only=True,
        help_text="Whether state is SUPERSEDED: its operation ended while it could still be "
        "decided, so it can no longer be.",
    )

    class Meta:
        model = ApprovalRequest
        fields = [
            "id",
            "state",
            "superseded",
            "operation",
            "call",
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


class DecisionSerializer(StrictSerializer):
    decision = serializers.ChoiceField(choices=["approve", "deny"])
    reason = OptionalText(
        max_length=1000,
        allow_blank=True,
        help_text="Why: up to 1000 characters, kept whole as the approval's `decision_reason`; "
        "a denial needs one, and the model is told it.",
    )
    arguments = serializers.DictField(
        required=False, help_text="Approve only: replaces the call's arguments (validated again)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["decision"] == "deny" and "arguments" in attrs:
            raise serializers.ValidationError({"arguments": "only an approval may edit them"})
        return attrs
