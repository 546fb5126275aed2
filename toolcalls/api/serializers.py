"""Request validation and response shapes of the operations API. No logic: views call services.

Request bodies refuse fields they do not know and values not of their field's JSON type
(:class:`StrictSerializer`); responses say
``null`` for an absent value, never ``""`` (:class:`NullForBlank`), and date-times in UTC
ending in ``Z`` (DRF's ``DateTimeField`` under ``TIME_ZONE = "UTC"``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from providers.families import ADAPTERS
from toolcalls.api.settings_schema import settings_schema
from toolcalls.guards import FRACTIONAL, GUARDS
from toolcalls.models import (
    REASON_MAX_LENGTH,
    AgentProfile,
    AgentRevision,
    AuditEvent,
    ModelTurn,
    Operation,
    TenantTool,
    ToolCall,
)
from toolcalls.reasons import REASON_CODES, reason_code
from toolcalls.registry import RISKS
from toolcalls.services.operations import MODEL_NAME
from toolcalls.services.reconcile import RESOLUTIONS
from toolcalls.services.scripts import problem_text, shape_problem
from toolcalls.states import OPERATION_TERMINAL, OperationState
from toolcalls.text import plain, visible, visible_pattern

MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_LENGTH = 100
MAX_METADATA_VALUE_LENGTH = 500


class BudgetLimit(serializers.FloatField):
    """A budget's limit: a JSON number; shown as stored (a count stays a whole number)."""

    def to_representation(self, value: Any) -> Any:
        return value


def _budgets_schema() -> dict[str, Any]:
    """Budget overrides as ``budgets_for`` takes them: known names, positive, whole numbers where
    they count things, at most ``CALLGATE_GUARD_LIMITS``."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            name: {
                "type": "number" if name in FRACTIONAL else "integer",
                "minimum": 0,
                "exclusiveMinimum": True,
                "maximum": settings.CALLGATE_GUARD_LIMITS[name],
            }
            for name in GUARDS
        },
    }


#: The JSON type a request field takes, by the DRF field that reads it (the first that
#: matches). DRF would take others and convert them: ``2`` as ``"2"``, ``"true"`` as ``true``,
#: ``"5"`` and ``5.0`` as ``5``.
JSON_TYPES: tuple[tuple[type[serializers.Field], str], ...] = (
    (serializers.BooleanField, "boolean"),
    (serializers.IntegerField, "integer"),
    (serializers.FloatField, "number"),
    (serializers.CharField, "string"),
    (serializers.ChoiceField, "string"),
)
#: A JSON type's name in a message.
_A = {
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def json_type(value: Any) -> str:
    """The JSON type of ``value`` as parsed from JSON (``null`` is not asked about)."""
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, kind):
            return name
    return "array" if isinstance(value, list) else "object"


def strict_errors(field: serializers.Field, value: Any) -> Any:
    """Where ``value`` (parsed JSON) is not of the JSON type ``field`` takes, or is text
    without a visible character where the field may not be blank (:func:`may_not_be_blank`),
    as DRF's validation detail: messages, or ``{index or key: detail}`` within a list or an
    object; ``None`` where it is neither. ``null``, ``""`` where it means none given
    (:class:`OptionalText`), and a list or an object where the field takes none, are the
    field's own to take or refuse."""
    if value is None or (value == "" and isinstance(field, OptionalText)):
        return None
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        found = {i: strict_errors(field.child, item) for i, item in enumerate(value)}
    elif isinstance(field, serializers.DictField) and isinstance(value, dict):
        found = {key: strict_errors(_member(field, key), item) for key, item in value.items()}
    else:
        expected = next((name for kind, name in JSON_TYPES if isinstance(field, kind)), None)
        actual = json_type(value)
        if expected not in (None, actual) and (expected, actual) != ("number", "integer"):
            return [f"Must be a JSON {expected}, not {_A[actual]}."]
        if may_not_be_blank(field) and isinstance(value, str) and not visible(value):
            return [str(field.error_messages["blank"])]  # as DRF says it of ""
        return None
    return {key: detail for key, detail in found.items() if detail} or None


def may_not_be_blank(field: serializers.Field) -> bool:
    """Whether ``field`` is text that may not be blank: it must hold a visible character
    (:func:`toolcalls.text.visible`), not only white space or format characters such as
    U+200B, which DRF (trimming white space, if at all) takes."""
    return isinstance(field, serializers.CharField) and not field.allow_blank


class OptionalText(serializers.CharField):
    """Optional text of a request body whose absence is stored as ``""``: left out, ``null``
    and ``""`` alike mean none given and read as ``""``, so a value a response shows as
    ``null`` (:class:`NullForBlank`) can be sent back as it was read. Any other text keeps the
    field's rules: blank text (white space or format characters alone) is refused unless
    ``allow_blank`` says otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, allow_null=True, default="", **kwargs)

    def run_validation(self, data: Any = serializers.empty) -> Any:
        if data is None or data == "":
            return ""
        return super().run_validation(data)


class OptionalUrl(OptionalText, serializers.URLField):
    """An optional URL (:class:`OptionalText`): none given, or a URL."""


def _member(field: serializers.DictField, key: str) -> serializers.Field:
    """The field that reads member ``key`` of ``field``: its child, or for budgets the
    budget's own (:meth:`BudgetsField.member`: a count takes an integer)."""
    return field.member(key) if isinstance(field, BudgetsField) else field.child


class StrictSerializer(serializers.Serializer):
    """A request body: a field it does not declare is a validation error naming it (a typo such
    as ``budget`` for ``budgets`` must not start an operation with default budgets), and so is
    a value not of its field's JSON type (``"model": 2`` is not ``"2"``, ``"stream": "true"``
    is not ``true``) or text without a visible character where blank text is refused
    (``"input": "\u200b"`` as ``""``), in lists and objects too (``tools.1``)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return super().to_internal_value(data)  # DRF refuses it: not an object
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            known = ", ".join(self.fields) or "no field"
            raise serializers.ValidationError(
                {name: [f"Unknown field; this body takes: {known}."] for name in unknown}
            )
        # Checked before DRF reads the values (JSON_TYPES), reported with its other errors.
        wrong = {
            name: detail
            for name, field in self.fields.items()
            if name in data and (detail := strict_errors(field, data[name]))
        }
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not wrong or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**exc.detail, **wrong}) from None
        if wrong:
            raise serializers.ValidationError(wrong)
        return value


class NoFields(StrictSerializer):
    """The body of an action that takes no fields: ``{}``, or no body at all; any field is
    refused as :class:`StrictSerializer` refuses one it does not declare."""


class NameList(serializers.ListField):
    """Names of distinct things (tools, arguments): each may be given once. A name given twice
    is a mistake, not a wish for it twice; documented as ``uniqueItems``."""

    unique_items = True

    def to_internal_value(self, data: Any) -> list[Any]:
        names: list[Any] = super().to_internal_value(data)
        repeated = sorted(name for name, count in Counter(names).items() if count > 1)
        if repeated:
            raise serializers.ValidationError(
                f"Each name may be given once; given more than once: {', '.join(repeated)}."
            )
        return names


class NullForBlank(serializers.ModelSerializer):
    """A model's blank text (``""``: nothing there) is ``null`` in the response, and documented
    as nullable. Declared text fields opt in with ``allow_null=True``."""

    def build_standard_field(self, field_name: str, model_field: Any) -> tuple[Any, dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        if isinstance(model_field, models.CharField | models.TextField) and model_field.blank:
            # Never "" in a response, so not documented as "" either (a URL or null).
            kwargs.update(allow_null=True, allow_blank=False)
        return field_class, kwargs

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        for name, field in self.fields.items():
            if field.allow_null and data.get(name) == "":
                data[name] = None
        return data


def replies_check(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``value`` if it has the shape of a list of replay replies (docs/scenarios.md); raises
    DRF's ``ValidationError`` naming the first wrong part otherwise. The service checks each
    reply for the operation's family (``invalid_replies``)."""
    problem = shape_problem(value)
    if problem is not None:
        raise serializers.ValidationError(problem_text(problem))
    return value


class SettingsSerializer(StrictSerializer):
    """Model settings (docs/settings.md), each one optional. The bounds given are the widest
    any API family takes; the operation's family may take less or refuse a setting, as each
    setting's description says (400 invalid_request naming settings.<name>)."""

    #: What the families check of each value, for the document (ContractSchema).
    documented = settings_schema()
    max_output_tokens = serializers.IntegerField(required=False)
    temperature = serializers.FloatField(required=False)
    top_p = serializers.FloatField(required=False)
    reasoning_effort = serializers.CharField(max_length=40, required=False)
    thinking_budget_tokens = serializers.IntegerField(required=False)
    tool_choice = serializers.CharField(max_length=200, required=False)
    parallel_tool_calls = serializers.BooleanField(required=False)


def _metadata_schema() -> dict[str, Any]:
    """Labels as :class:`MetadataField` takes them (a pattern finds a visible character). What
    a key may be is said in words: OpenAPI 3.0 has no ``propertyNames``."""
    return {
        "type": "object",
        "description": "The caller's own labels: at most "
        f"{MAX_METADATA_KEYS}, each key of 1 to {MAX_METADATA_KEY_LENGTH} characters with a "
        "visible one among them, every one showing (plain spaces aside: no control, "
        "bidirectional or zero-width character) and no colon (a metadata=key:value filter "
        "splits at the first colon), each value text with a visible character.",
        "maxProperties": MAX_METADATA_KEYS,
        "additionalProperties": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_METADATA_VALUE_LENGTH,
            "pattern": visible_pattern(),
        },
    }


@extend_schema_field(_metadata_schema())
class MetadataField(serializers.DictField):
    """The caller's own labels: at most :data:`MAX_METADATA_KEYS`; each key with a visible
    character and no colon (a ``metadata=key:value`` filter splits at the first colon, so a
    key with one could never be asked for) and every character showing, plain spaces aside
    (:func:`~toolcalls.text.plain`, the rule for API keys' names: a bidirectional control,
    a tab or a zero-width character would let ``team`` pass for another ``team``); each value
    text with a visible character. A refused key is named with its reason."""

    child = serializers.CharField(max_length=MAX_METADATA_VALUE_LENGTH)

    def to_internal_value(self, data: Any) -> dict[str, str]:
        value: dict[str, str] = super().to_internal_value(data)
        if len(value) > MAX_METADATA_KEYS:
            raise serializers.ValidationError(f"At most {MAX_METADATA_KEYS} keys.")
        refused = {key: [why] for key in value if (why := _metadata_key_problem(key))}
        if refused:
            raise serializers.ValidationError(refused)
        return value


def _metadata_key_problem(key: str) -> str:
    """Why ``key`` cannot name a label (:class:`MetadataField`), or ``""``."""
    if ":" in key or not visible(key) or len(key) > MAX_METADATA_KEY_LENGTH:
        return (
            f"A key holds a visible character and no colon, in at most "
            f"{MAX_METADATA_KEY_LENGTH} characters (a metadata=key:value filter splits at "
            "the first colon)."
        )
    if not plain(key):
        return (
            "A key has only characters that show, and plain spaces (no control, bidirectional "
            "or zero-width character: each would make it look like another key)."
        )
    return ""


class MessageSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=["user", "assistant"])
    text = serializers.CharField(max_length=100_000, trim_whitespace=False)


@extend_schema_field(_budgets_schema())
class BudgetsField(serializers.DictField):
    """Guard overrides by name (docs/guards.md): JSON numbers, JSON integers where they count
    things (:meth:`member`, which :class:`StrictSerializer` checks each one against)."""

    child = BudgetLimit()

    def member(self, name: str) -> serializers.Field:
        """The field budget ``name`` takes: an integer where it counts things (``max_turns``),
        else a number (seconds, USD; an unknown name is refused as unknown)."""
        return _COUNT if name in GUARDS and name not in FRACTIONAL else self.child

    def to_internal_value(self, data: Any) -> dict[str, float | int]:
        value = super().to_internal_value(data)
        unknown = sorted(set(value) - set(GUARDS))
        if unknown:
            raise serializers.ValidationError(f"unknown budgets: {', '.join(unknown)}")
        return {k: int(v) if float(v).is_integer() else v for k, v in value.items()}


#: What a budget that counts things takes: a JSON integer.
_COUNT = serializers.IntegerField()


class OperationCreateSerializer(StrictSerializer):
    agent = serializers.CharField(
        max_length=60,
        required=False,
        help_text="An agent profile: name (its latest revision) or name@revision (the "
        "revision's number without a leading zero).",
    )
    family = serializers.ChoiceField(
        choices=sorted(ADAPTERS), required=False, help_text="Required without agent."
    )
    model = serializers.RegexField(MODEL_NAME, required=False, help_text="Required without agent.")
    instructions = serializers.CharField(
        max_length=100_000, trim_whitespace=False, required=False, allow_blank=True
    )
    messages = MessageSerializer(
        many=True, required=False, max_length=500, help_text="Earlier conversation, in order."
    )
    settings = SettingsSerializer(required=False)
    input = serializers.CharField(max_length=100_000, trim_whitespace=False)
    subject_ref = serializers.CharField(max_length=200)
    tools = NameList(child=serializers.CharField(max_length=200), required=False, max_length=100)
    budgets = BudgetsField(required=False)
    metadata = MetadataField(required=False)
    transport = serializers.ChoiceField(
        choices=list(Operation.Transport.values), default=Operation.Transport.LIVE
    )
    stream = serializers.BooleanField(required=False, allow_null=True, default=None)
    replies = serializers.ListField(
        child=serializers.DictField(), required=False, help_text="Replay transport only."
    )

    def validate_replies(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return replies_check(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        replay = attrs["transport"] == Operation.Transport.REPLAY
        if replay != bool(attrs.get("replies")):
            raise serializers.ValidationError(
                {"replies": "required with the replay transport, and only with it"}
            )
        return attrs

    def to_internal_value(self, data: Any) -> Any:
        """As declared, and ``family`` and ``model`` required without ``agent`` (reported with
        the body's other field errors)."""
        missing = {}
        if isinstance(data, Mapping) and "agent" not in data:
            message = "This field is required without agent."
            missing = {name: [message] for name in ("family", "model") if name not in data}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not missing or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**missing, **exc.detail}) from None
        if missing:
            raise serializers.ValidationError(missing)
        return value


class AgentRefSerializer(serializers.Serializer):
    name = serializers.CharField(source="profile.name")
    revision = serializers.IntegerField(source="number")


class CountersSerializer(serializers.Serializer):
    """What an operation has used so far (documentation of ``Operation.counters``)."""

    turns = serializers.IntegerField(min_value=0, help_text="Model replies recorded.")
    tool_calls = serializers.IntegerField(min_value=0)
    calls_per_tool = serializers.DictField(
        child=serializers.IntegerField(min_value=0), help_text="Tool name → calls proposed."
    )
    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)
    cost_usd = serializers.FloatField(min_value=0, help_text="US dollars.")
    no_progress_turns = serializers.IntegerField(
        min_value=0, help_text="Turns in a row that changed nothing (toolcalls.guards)."
    )


class OperationSerializer(NullForBlank):
    id = serializers.CharField(source="public_id")
    family = serializers.ChoiceField(choices=sorted(ADAPTERS))
    budgets = BudgetsField(
        help_text="Guard limits in force, by name (docs/guards.md); counts are whole numbers."
    )
    metadata = serializers.DictField(
        child=serializers.CharField(), help_text="The caller's own labels."
    )
    input = serializers.CharField(source="input_text")
    tools = serializers.ListField(source="tool_names", child=serializers.CharField())
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    agent = AgentRefSerializer(
        source="agent_revision",
        read_only=True,
        allow_null=True,
        help_text="The agent profile revision it runs with; null when none.",
    )
    counters = serializers.SerializerMethodField()
    ended = serializers.SerializerMethodField(
        help_text="The operation reached a final state: nothing more will happen to it."
    )
    final_text = serializers.CharField(allow_null=True)
    terminal_reason = serializers.CharField(
        allow_null=True,
        help_text="Why it escalated or ended (other than COMPLETED), for people; starts with "
        "reason_code.",
    )
    reason_code = serializers.SerializerMethodField(
        help_text="The machine-readable head of terminal_reason (docs/error-codes.md); null "
        "without a reason."
    )
    parent = serializers.SerializerMethodField(
        help_text="The ended operation this one follows up (its ID), or null."
    )
    follow_ups = serializers.SerializerMethodField(
        help_text="IDs of the operations started as follow-ups of this one, oldest first."
    )

    class Meta:
        model = Operation
        fields = [
            "id",
            "state",
            "ended",
            "tenant",
            "subject_ref",
            "family",
            "model",
            "transport",
            "stream",
            "agent",
            "instructions",
            "messages",
            "input",
            "settings",
            "tools",
            "budgets",
            "counters",
            "deadline_at",
            "final_text",
            "terminal_reason",
            "reason_code",
            "metadata",
            "parent",
            "follow_ups",
            "created_at",
            "updated_at",
        ]

    def get_parent(self, operation: Operation) -> str | None:
        return operation.parent.public_id if operation.parent else None

    def get_follow_ups(self, operation: Operation) -> list[str]:
        follow_ups = sorted(operation.follow_ups.all(), key=lambda f: (f.created_at, f.pk))
        return [follow_up.public_id for follow_up in follow_ups]

    @extend_schema_field(CountersSerializer)
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

    def get_ended(self, operation: Operation) -> bool:
        return operation.state in OPERATION_TERMINAL

    @extend_schema_field(serializers.ChoiceField(choices=sorted(REASON_CODES), allow_null=True))
    def get_reason_code(self, operation: Operation) -> str | None:
        return reason_code(operation.terminal_reason)


class UsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField(min_value=0)
    output_tokens = serializers.IntegerField(min_value=0)


class TurnSerializer(NullForBlank):
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

    @extend_schema_field(UsageSerializer)
    def get_usage(self, turn: ModelTurn) -> dict[str, int]:
        return {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens}


class CallSerializer(NullForBlank):
    """A call; ``protected_audit`` only for keys with the ``audit:read`` scope."""

    sometimes_absent = ("protected_audit",)
    id = serializers.CharField(source="public_id")
    tool = serializers.CharField(source="tool_name")
    turn = serializers.IntegerField(source="turn.index")
    arguments = serializers.DictField(
        allow_null=True,
        help_text="The arguments as validated (a JSON object); null when the model's were not "
        "exactly one usable JSON object.",
    )
    model_result = serializers.DictField(
        allow_null=True,
        help_text="The result the model is given (a JSON object); null while there is none.",
    )
    protected_audit = serializers.DictField(
        allow_null=True,
        help_text="The result's binding and handler (a JSON object); null when none was recorded.",
    )

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


class EventSerializer(NullForBlank):
    sequence = serializers.IntegerField(
        source="seq", help_text="The event's position in its operation's audit trail, from 1."
    )
    call = serializers.CharField(source="call.public_id", allow_null=True, default=None)
    approval = serializers.CharField(source="approval_ref", allow_null=True)

    class Meta:
        model = AuditEvent
        fields = [
            "sequence",
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


class AgentDefinitionSerializer(StrictSerializer):
    """An agent revision's definition; on a new revision, a field left out keeps its value."""

    family = serializers.ChoiceField(choices=sorted(ADAPTERS), required=False)
    model = serializers.RegexField(MODEL_NAME, required=False)
    instructions = serializers.CharField(
        max_length=100_000,
        trim_whitespace=False,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="None (null or empty) sends no system prompt.",
    )
    settings = SettingsSerializer(required=False)
    tools = NameList(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=100,
        help_text="Default on a new agent: every tool the tenant may use.",
    )
    budgets = BudgetsField(required=False)
    approval_overrides = serializers.DictField(
        child=serializers.DictField(),
        required=False,
        help_text='Tool name → {"policy": "always"} or {"policy": "above_threshold", '
        '"threshold": cents}; added to the tool\'s own policy, never looser.',
    )
    note = OptionalText(max_length=500, allow_blank=True)

    def validate_instructions(self, value: str | None) -> str:
        """``null`` as a revision reads none (:class:`NullForBlank`): stored as ``""``."""
        return value or ""


class AgentCreateSerializer(AgentDefinitionSerializer):
    name = serializers.RegexField(r"^[a-z0-9][a-z0-9_-]{0,39}$")
    family = serializers.ChoiceField(choices=sorted(ADAPTERS))
    model = serializers.RegexField(MODEL_NAME)


class AgentRevisionSerializer(NullForBlank):
    name = serializers.CharField(source="profile.name")
    revision = serializers.IntegerField(source="number")
    tools = serializers.ListField(source="tool_names", child=serializers.CharField())

    class Meta:
        model = AgentRevision
        fields = [
            "name",
            "revision",
            "family",
            "model",
            "instructions",
            "settings",
            "tools",
            "budgets",
            "approval_overrides",
            "note",
            "created_by",
            "created_at",
        ]


class AgentSerializer(NullForBlank):
    latest = serializers.SerializerMethodField(help_text="The latest revision.")

    class Meta:
        model = AgentProfile
        fields = ["name", "latest_revision", "created_at", "updated_at", "latest"]

    @extend_schema_field(AgentRevisionSerializer)
    def get_latest(self, profile: AgentProfile) -> dict[str, Any]:
        (latest,) = profile.latest  # type: ignore[attr-defined]  # the view's prefetch
        return dict(AgentRevisionSerializer(latest).data)


class ExtendSerializer(StrictSerializer):
    budgets = BudgetsField(required=False, default=dict)
    note = OptionalText(max_length=500, allow_blank=True)


class ResolveSerializer(StrictSerializer):
    """Recording a lost outcome: the console's resolve form, field for field."""

    resolution = serializers.ChoiceField(
        choices=list(RESOLUTIONS),
        help_text="What happened downstream: `applied` (it took effect; the model is told so), "
        "`not_applied` (it did not; its idempotency key is released, so the model may try it "
        "again) or `unknown` (nobody can tell; the model is told not to assume either way, and "
        "the key stays held).",
    )
    note = OptionalText(
        max_length=500,
        allow_blank=True,
        help_text="What was checked, for people; an `applied` outcome sends it to the model too.",
    )


class ReasonSerializer(StrictSerializer):
    reason = serializers.CharField(
        max_length=REASON_MAX_LENGTH,
        help_text=f"Why, for people: up to {REASON_MAX_LENGTH} characters, kept whole in the "
        "operation's `terminal_reason` after its code (`CANCELLED: …`, `STOPPED: …`).",
    )


#: A tenant's approval overrides of a tool (``null``: as the tool spec says).
TOOL_APPROVALS = [TenantTool.Approval.ALWAYS.value, TenantTool.Approval.THRESHOLD.value]


class ToolApprovalSerializer(serializers.Serializer):
    policy = serializers.CharField(help_text="When a call of the tool needs a person's approval.")
    revision = serializers.CharField(help_text="The policy's revision, recorded on each call.")


class ToolOverridesSerializer(serializers.Serializer):
    max_calls = serializers.IntegerField(allow_null=True, help_text="Calls per operation.")
    approval = serializers.ChoiceField(choices=TOOL_APPROVALS, allow_null=True)
    approval_threshold = serializers.IntegerField(allow_null=True)


class ForkSerializer(StrictSerializer):
    """A fork's body; ``model`` with ``agent`` is refused naming ``model``, before the agent is
    looked up (an unknown agent alone is ``unknown_agent``, from the service)."""

    from_turn = serializers.IntegerField(
        min_value=0, help_text="The turn (its index, from 0) whose conversation the fork starts."
    )
    model = serializers.RegexField(
        MODEL_NAME,
        required=False,
        help_text="Another model for the fork (default: the same); not with agent.",
    )
    agent = serializers.CharField(
        max_length=60,
        required=False,
        help_text="Run the fork with this agent profile revision (name: its latest, or "
        "name@revision, the number without a leading zero), which sets family, model, "
        "instructions, tools, settings and budgets.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "model" in attrs and "agent" in attrs:
            message = "Not with agent: the agent profile sets the model; leave the model out."
            raise serializers.ValidationError({"model": [message]})
        return attrs


class ToolSerializer(serializers.Serializer):
    """A registered tool as the key's tenant has it (a :class:`toolcalls.catalogue.Entry`):
    the spec with the tenant's overrides applied, whether it is enabled, and the overrides."""

    name = serializers.CharField(source="spec.name")
    description = serializers.CharField(source="spec.description")
    parameters = serializers.DictField(
        source="spec.parameters", help_text="JSON Schema (Draft 2020-12) of the arguments."
    )
    schema_version = serializers.CharField(source="spec.schema_version")
    risk = serializers.ChoiceField(source="spec.risk", choices=list(RISKS))
    timeout_ms = serializers.IntegerField(source="spec.timeout_ms", min_value=1)
    approval = serializers.SerializerMethodField(
        help_text="The approval policy in force for this tenant (overrides applied)."
    )
    enabled = serializers.BooleanField(
        help_text="The tenant may use it: operations may offer it and the model's calls of it run."
    )
    overrides = serializers.SerializerMethodField(
        help_text="The tenant's overrides; each only ever stricter than the tool spec."
    )

    @extend_schema_field(ToolApprovalSerializer)
    def get_approval(self, entry: Any) -> dict[str, str]:
        return {"policy": entry.spec.approval.description, "revision": entry.spec.approval.revision}

    @extend_schema_field(ToolOverridesSerializer)
    def get_overrides(self, entry: Any) -> dict[str, Any]:
        row = entry.row
        return {
            "max_calls": row.max_calls if row else None,
            "approval": (row.approval or None) if row else None,
            "approval_threshold": row.approval_threshold if row else None,
        }


class ToolSettingsSerializer(StrictSerializer):
    """A tenant's settings of one tool (``PUT``: all of them; ``PATCH``: those given)."""

    enabled = serializers.BooleanField()
    max_calls = serializers.IntegerField(
        min_value=1,
        max_value=settings.CALLGATE_GUARD_LIMITS["max_calls_per_tool"],
        allow_null=True,
        default=None,
        help_text="Calls of this tool per operation (at most the server's limit of "
        "max_calls_per_tool); null: the operation's max_calls_per_tool.",
    )
    approval = serializers.ChoiceField(
        choices=TOOL_APPROVALS,
        allow_null=True,
        default=None,
        help_text="always: every call waits for a human; threshold: calls above "
        "approval_threshold do (threshold policies only); null: as the tool spec says.",
    )
    approval_threshold = serializers.IntegerField(
        min_value=0,
        allow_null=True,
        default=None,
        help_text="With approval threshold: below the spec's own threshold, in its unit.",
    )


class FollowUpSerializer(StrictSerializer):
    input = serializers.CharField(
        max_length=100_000, trim_whitespace=False, help_text="The user's next message."
    )
    replies = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="The follow-up's scripted replies; with the replay transport only, as the "
        "operation it follows.",
    )

    def validate_replies(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return replies_check(value)


class FieldErrorsSerializer(serializers.Serializer):
    sometimes_absent = ("fields",)
    fields = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Each wrong input (a body field's dotted path, a query parameter, a header; "
        "body: the body as a whole) → its messages.",
    )


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable and machine-readable (docs/api.md).")
    message = serializers.CharField()
    details = FieldErrorsSerializer(
        help_text="fields for wrong inputs; a few refusals add their facts; else {}."
    )
    request_id = serializers.CharField(
        allow_null=True, help_text="The response's Request-Id, to quote when asking about it."
    )


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok"])


class ReadinessChecksSerializer(serializers.Serializer):
    database = serializers.BooleanField()
    broker = serializers.BooleanField(help_text="Always true when tasks run in-process.")


class ReadinessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "unavailable"])
    checks = ReadinessChecksSerializer()


class ErrorSerializer(serializers.Serializer):
    """``{"error": {"code", "message", "details"}}`` (documentation only)."""

    error = ErrorBodySerializer()


OPERATION_STATES = OperationState.values
