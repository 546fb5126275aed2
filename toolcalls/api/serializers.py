"""Request validation and response shapes of the operations API. No logic: views call services."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from rest_framework import serializers

from providers.families import ADAPTERS
from providers.replay import REPLY_SCHEMA
from toolcalls.guards import GUARDS
from toolcalls.models import AuditEvent, ModelTurn, Operation, ToolCall
from toolcalls.states import OperationState

_REPLIES = Draft202012Validator({"type": "array", "minItems": 1, "items": REPLY_SCHEMA})
MAX_METADATA_KEYS = 50


class OperationCreateSerializer(serializers.Serializer):
    family = serializers.ChoiceField(choices=sorted(ADAPTERS))
    model = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$")
    input = serializers.CharField(max_length=100_000, trim_whitespace=False)
    subject_ref = serializers.CharField(max_length=200)
    tools = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, max_length=100
    )
    budgets = serializers.DictField(child=serializers.FloatField(), required=False)
    metadata = serializers.DictField(child=serializers.CharField(max_length=500), required=False)
    transport = serializers.ChoiceField(
        choices=list(Operation.Transport.values), default=Operation.Transport.LIVE
    )
    stream = serializers.BooleanField(required=False, allow_null=True, default=None)
    replies = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Replay transport only."
    )

    def validate_budgets(self, value: dict[str, float]) -> dict[str, float | int]:
        unknown = sorted(set(value) - set(GUARDS))
        if unknown:
            raise serializers.ValidationError(f"unknown budgets: {', '.join(unknown)}")
        return {k: int(v) if float(v).is_integer() else v for k, v in value.items()}

    def validate_metadata(self, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_METADATA_KEYS:
            raise serializers.ValidationError(f"at most {MAX_METADATA_KEYS} keys")
        return value

    def validate_replies(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        errors = sorted(_REPLIES.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path)
            raise serializers.ValidationError(f"{where}: {errors[0].message}")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        replay = attrs["transport"] == Operation.Transport.REPLAY
        if replay != bool(attrs.get("replies")):
            raise serializers.ValidationError(
                {"replies": "required with the replay transport, and only with it"}
            )
        return attrs


class OperationSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="public_id")
    input = serializers.CharField(source="input_text")
    tools = serializers.ListField(source="tool_names", child=serializers.CharField())
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    counters = serializers.SerializerMethodField()
    final_text = serializers.CharField(allow_null=True)
    terminal_reason = serializers.CharField(allow_null=True)

    class Meta:
        model = Operation
        fields = [
            "id",
            "state",
            "tenant",
            "subject_ref",
            "family",
            "model",
            "transport",
            "stream",
            "input",
            "tools",
            "budgets",
            "counters",
            "deadline_at",
            "final_text",
            "terminal_reason",
            "metadata",
            "created_at",
            "updated_at",
        ]

    def get_counters(self, operation: Operation) -> dict[str, Any]:
        return {
            "turns": operation.turn_count,
            "tool_calls": operation.tool_call_count,
            "calls_per_tool": operation.calls_per_tool,
            "input_tokens": operation.input_tokens,
            "output_tokens": operation.output_tokens,
            "cost_usd": operation.cost_micros / 1_000_000,
            "no_progress_turns": operation.no_progress_turns,
        }

    def to_representation(self, instance: Operation) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["final_text"] = instance.final_text or None
        data["terminal_reason"] = instance.terminal_reason or None
        return data


class TurnSerializer(serializers.ModelSerializer):
    turn = serializers.IntegerField(source="index", help_text="The turn index, from 0.")
    usage = serializers.SerializerMethodField()

    class Meta:
        model = ModelTurn
        fields = [
            "turn",
            "response_id",
            "outcome",
            "raw_reason",
            "text",
            "error_message",
            "usage",
            "provider",
            "family",
            "model",
            "sdk_version",
            "adapter_revision",
            "transport",
            "latency_ms",
            "created_at",
        ]

    def get_usage(self, turn: ModelTurn) -> dict[str, int]:
        return {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens}


class CallSerializer(serializers.ModelSerializer):
    """A call; ``protected_audit`` only for keys with the ``audit:read`` scope."""

    id = serializers.CharField(source="public_id")
    tool = serializers.CharField(source="tool_name")
    turn = serializers.IntegerField(source="turn.index")

    class Meta:
        model = ToolCall
        fields = [
            "id",
            "provider_call_id",
            "turn",
            "position",
            "tool",
            "state",
            "attempt",
            "arguments",
            "arguments_sha256",
            "arguments_edited",
            "request_sha256",
            "result_sha256",
            "binding_sha256",
            "idempotency_key",
            "error_code",
            "model_result",
            "protected_audit",
            "created_at",
            "updated_at",
        ]

    def to_representation(self, instance: ToolCall) -> dict[str, Any]:
        data = super().to_representation(instance)
        if not self.context.get("audit"):
            data.pop("protected_audit")
        return data


class EventSerializer(serializers.ModelSerializer):
    call = serializers.CharField(source="call.public_id", allow_null=True, default=None)
    approval = serializers.CharField(source="approval_ref")

    class Meta:
        model = AuditEvent
        fields = [
            "seq",
            "kind",
            "actor",
            "from_state",
            "to_state",
            "call",
            "approval",
            "details",
            "created_at",
            "prev_hash",
            "hash",
        ]


class ExtendSerializer(serializers.Serializer):
    budgets = serializers.DictField(child=serializers.FloatField(), required=False, default=dict)
    note = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500)


class ToolSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.DictField()
    schema_version = serializers.CharField()
    risk = serializers.CharField()
    timeout_ms = serializers.IntegerField()
    approval = serializers.DictField()


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable and machine-readable (docs/api.md).")
    message = serializers.CharField()
    details = serializers.DictField(help_text="Fields → messages for invalid_request; else {}.")


class ErrorSerializer(serializers.Serializer):
    """``{"error": {"code", "message", "details"}}`` (documentation only)."""

    error = ErrorBodySerializer()


OPERATION_STATES = OperationState.values
