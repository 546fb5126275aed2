"""Engine data: tenants, operations, model turns, tool calls, idempotency records, audit events.

Models hold data and database-level invariants only; every write goes through
``toolcalls.services``.
"""

from __future__ import annotations

import secrets
from itertools import chain
from typing import Any

from django.conf import settings
from django.db import models

from providers.base import Outcome
from providers.families import get_adapter
from toolcalls.ids import new_call_id, new_operation_id
from toolcalls.states import AuditKind, CallState, OperationState
from toolcalls.text import shown_plain

#: The longest reason a person gives (deciding an approval, cancelling or stopping an operation),
#: in characters: kept whole where it is stored.
REASON_MAX_LENGTH = 1000


def new_catalogue_revision() -> str:
    """A fresh :attr:`Tenant.catalogue_revision`: 32 hex characters (128 random bits)."""
    return secrets.token_hex(16)


def _state_check(name: str, choices: type[models.TextChoices]) -> models.CheckConstraint:
    return models.CheckConstraint(
        condition=models.Q(state__in=choices.values), name=f"{name}_state_valid"
    )


class Tenant(models.Model):
    """A customer organisation. Users see only the data of tenants they are members of."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    is_active = models.BooleanField(default=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="tenants", blank=True)
    #: Whether the tenant has an active webhook endpoint, kept by the API app whenever an
    #: endpoint is saved or deleted. The engine reads it with the operation it locks, so a
    #: tenant without webhooks pays nothing per audit event.
    webhooks_active = models.BooleanField(default=False, editable=False)
    #: A new random token whenever the tenant's tool catalogue changes (in the same
    #: transaction), so a process may keep the catalogue it loaded for as long as the tenant row
    #: it reads says the same token (:mod:`toolcalls.catalogue`).
    catalogue_revision = models.CharField(
        max_length=32, default=new_catalogue_revision, editable=False
    )

    def __str__(self) -> str:
        return self.slug


class TenantTool(models.Model):
    """One registered tool in a tenant's catalogue: whether the tenant may use it, and the
    tenant's overrides, each only ever stricter than the tool spec (:mod:`toolcalls.catalogue`).
    A tool without a row is not in the catalogue: the tenant may not use it."""

    class Approval(models.TextChoices):
        SPEC = "", "as the tool spec says"
        ALWAYS = "always", "every call waits for a human"
        THRESHOLD = "threshold", "above a lower threshold than the spec's"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tools")
    tool_name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    max_calls = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Calls of this tool per operation, at most the guard limit of "
        "max_calls_per_tool; empty: the operation's max_calls_per_tool.",
    )
    approval = models.CharField(max_length=20, choices=Approval.choices, blank=True)
    approval_threshold = models.PositiveBigIntegerField(
        null=True,
        blank=True,
        help_text="With approval 'threshold': calls above this value (the spec's unit) wait "
        "for a human; below the spec's own threshold.",
    )
    updated_by = models.CharField(max_length=200, help_text="Who changed it last (an actor).")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "tool_name"], name="tenant_tool_unique"),
            models.CheckConstraint(
                condition=models.Q(approval__in=["", "always", "threshold"]),
                name="tenant_tool_approval_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(approval="threshold", approval_threshold__isnull=False)
                | (~models.Q(approval="threshold") & models.Q(approval_threshold__isnull=True)),
                name="tenant_tool_threshold_with_approval",
            ),
        ]
        ordering = ["tenant", "tool_name"]

    def __str__(self) -> str:
        return self.tool_name


class ReplayScript(models.Model):
    """Scripted provider replies served in order by the replay transport (docs/scenarios.md)."""

    name = models.CharField(max_length=200)
    family = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    replies = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.family})"


class AgentProfile(models.Model):
    """A tenant's named agent: what an operation started from it runs with. The definition
    lives in its immutable :class:`AgentRevision` rows; the profile only names them and
    counts them (``latest_revision``, kept under the profile's row lock)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="agents")
    name = models.SlugField(max_length=40, help_text="Unique per tenant; never changes.")
    latest_revision = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="agent_unique_name"),
        ]
        ordering = ["tenant", "name"]

    def __str__(self) -> str:
        return self.name


class ImmutableQuerySet(models.QuerySet["AgentRevision"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        raise PermissionError("agent revisions are immutable")

    def update(self, **kwargs: Any) -> int:
        raise PermissionError("agent revisions are immutable")


class AgentRevision(models.Model):
    """One immutable definition of an agent (``name@number``, numbered from 1): family, model,
    instructions, model settings, tools, budget overrides and approval overrides. A change to
    the agent is a new revision; operations keep the one they started with. PostgreSQL refuses
    UPDATE and DELETE of these rows (migration ``0017``)."""

    profile = models.ForeignKey(AgentProfile, on_delete=models.PROTECT, related_name="revisions")
    number = models.PositiveIntegerField()
    family = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    instructions = models.TextField(blank=True)
    settings = models.JSONField(default=dict, blank=True, help_text="ModelSettings by name.")
    tool_names = models.JSONField(help_text="The tools its operations are offered, in order.")
    budgets = models.JSONField(
        default=dict, blank=True, help_text="Guard overrides (toolcalls.guards)."
    )
    approval_overrides = models.JSONField(
        default=dict,
        blank=True,
        help_text='Tool name → {"policy": "always"} or {"policy": "above_threshold", '
        '"threshold": amount}: approvals added to the tool\'s own policy.',
    )
    note = models.CharField(max_length=500, blank=True, help_text="What changed, for people.")
    created_by = models.CharField(max_length=200, help_text="The actor who made it.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ImmutableQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "number"], name="agent_revision_unique"),
        ]
        ordering = ["profile", "number"]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """``name@number``, as requests name it."""
        return f"{self.profile.name}@{self.number}"

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise PermissionError("agent revisions are immutable")


class Operation(models.Model):
    """One business task driven through the tool-calling loop, across turns and approvals."""

    public_id = models.CharField(max_length=40, unique=True, default=new_operation_id)
    tenant = models.ForeignKey(  # indexed first in operation_tenant_created
        Tenant, on_delete=models.PROTECT, related_name="operations", db_index=False
    )
    subject_ref = models.CharField(max_length=200, help_text="Whom the operation acts for.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="operations"
    )
    started_by = models.ForeignKey(  # indexed where set: operation_started_by
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_index=False,
        help_text="Who started it for its requester (a fork's author); may not decide its "
        "approvals either.",
    )
    family = models.CharField(max_length=40)
    model = models.CharField(max_length=100)

    class Transport(models.TextChoices):
        REPLAY = "replay", "scripted replies"
        LIVE = "live", "provider API through its official SDK"

    transport = models.CharField(max_length=20, choices=Transport.choices, default=Transport.REPLAY)
    stream = models.BooleanField(default=False, help_text="Live transport: stream the replies.")
    replay_script = models.ForeignKey(
        ReplayScript, null=True, blank=True, on_delete=models.PROTECT, related_name="operations"
    )
    input_text = models.TextField()
    instructions = models.TextField(blank=True, help_text="The system prompt sent every turn.")
    messages = models.JSONField(
        default=list, blank=True, help_text='Earlier conversation: [{"role", "text"}], in order.'
    )
    settings = models.JSONField(
        default=dict,
        blank=True,
        help_text="Model settings asked for (ModelSettings).",
    )
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="follow_ups",
        help_text="The ended operation this one follows up.",
    )
    forked_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="forks",
        help_text="The operation whose conversation this one re-runs from a turn.",
    )
    from_turn = models.PositiveIntegerField(
        null=True, blank=True, help_text="The turn of forked_from this one starts at."
    )
    trace_context = models.JSONField(
        default=dict,
        blank=True,
        help_text="W3C trace context (traceparent) of the operation's trace; empty untraced.",
    )
    agent_revision = models.ForeignKey(
        AgentRevision,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="operations",
        help_text="The agent profile revision it was started from.",
    )
    tool_names = models.JSONField(help_text="Registry tools offered to the model.")
    metadata = models.JSONField(default=dict, blank=True, help_text="The caller's own labels.")
    state = models.CharField(
        max_length=20, choices=OperationState.choices, default=OperationState.PENDING
    )
    terminal_reason = models.CharField(
        max_length=REASON_MAX_LENGTH + 100,
        blank=True,
        help_text="Why it ended, its code in front: a person's reason kept whole.",
    )
    final_text = models.TextField(blank=True)
    conversation = models.JSONField(default=list, help_text="Provider-native items, opaque.")
    conversation_stored = models.PositiveIntegerField(
        default=0, help_text="Items of the conversation already stored with a turn's request."
    )
    bodies_pruned_at = models.DateTimeField(
        null=True, blank=True, help_text="When its request bodies, replies and conversation went."
    )
    budgets = models.JSONField(default=dict, help_text="Guard limits in force (toolcalls.guards).")
    deadline_at = models.DateTimeField(null=True, blank=True)
    turn_count = models.PositiveIntegerField(default=0, help_text="Model replies recorded.")
    retry_count = models.PositiveIntegerField(default=0, help_text="Consecutive retried failures.")
    tool_call_count = models.PositiveIntegerField(default=0)
    calls_per_tool = models.JSONField(default=dict, help_text="Tool name → calls proposed.")
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    cost_micros = models.PositiveBigIntegerField(default=0, help_text="Model cost, micro-USD.")
    no_progress_turns = models.PositiveIntegerField(
        default=0, help_text="Consecutive call sets without a new successful result."
    )
    guard_tripped = models.CharField(
        max_length=500, blank=True, help_text="A guard that tripped; escalates at the next turn."
    )
    resume_state = models.CharField(
        max_length=20, blank=True, help_text="Where an escalated operation resumes."
    )
    lease_token = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    turn_attempts = models.PositiveIntegerField(
        default=0, help_text="Claims of the current model request that never got recorded."
    )
    wake_at = models.DateTimeField(
        null=True, blank=True, help_text="A model request scheduled for later (a retry)."
    )
    audit_seq = models.PositiveIntegerField(default=0)
    audit_head = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        permissions = [
            ("resolve_operation", "Can extend, stop or resolve escalated operations"),
            ("use_write_tools", "Can have write tools run for their operations"),
            ("use_irreversible_tools", "Can have irreversible tools run for their operations"),
        ]
        constraints = [_state_check("operation", OperationState)]
        indexes = [
            models.Index(fields=["state", "updated_at"], name="operation_state_updated"),
            models.Index(fields=["tenant", "-created_at"], name="operation_tenant_created"),
            # The console's operations list, filtered by state or customer, newest first.
            models.Index(
                fields=["tenant", "state", "-created_at", "-id"], name="operation_tenant_state"
            ),
            models.Index(
                fields=["tenant", "subject_ref", "-created_at", "-id"],
                name="operation_tenant_subject",
            ),
            # A user's deletion looks here; set on forks only, so steps rarely write it.
            models.Index(
                fields=["started_by"],
                name="operation_started_by",
                condition=models.Q(started_by__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.public_id


class ModelTurn(models.Model):
    """One model request and its reply (including failed attempts), in order per operation."""

    operation = models.ForeignKey(  # indexed first in turn_unique_index
        Operation, on_delete=models.PROTECT, related_name="turns", db_index=False
    )
    index = models.PositiveIntegerField()
    # Provider-sent strings are text: their length is the provider's business, not a crash.
    response_id = models.TextField(blank=True)
    outcome = models.CharField(max_length=20, choices=[(o.value, o.value) for o in Outcome])
    raw_reason = models.TextField(blank=True)
    text = models.TextField(blank=True)
    error_message = models.TextField(blank=True)
    #: The request body as sent, but its conversation field holds only what the adapter put
    #: before the conversation (a developer message); the conversation's items are stored
    #: once each, in the ``request_items`` of the turn that first sent them.
    request_frame = models.JSONField()
    request_items = models.JSONField(
        default=list, help_text="Conversation items this request sent for the first time."
    )
    reply = models.JSONField(null=True, help_text="The wire reply; null if none came back.")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    provider = models.CharField(max_length=40)
    family = models.CharField(max_length=40)
    model = models.CharField(max_length=100)
    sdk_version = models.CharField(max_length=40, blank=True)
    adapter_revision = models.CharField(max_length=80)
    transport = models.CharField(max_length=20)
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["operation", "index"], name="turn_unique_index"),
        ]
        indexes = [models.Index(fields=["response_id"], name="turn_response_id")]
        ordering = ["operation", "index"]

    def __str__(self) -> str:
        return f"{self.operation_id}#{self.index}"

    @property
    def request_body(self) -> dict[str, Any]:
        """The request body exactly as it was sent: the frame, with the conversation items of
        this and every earlier turn in its conversation field (one query)."""
        field = get_adapter(self.family).conversation_field
        earlier = (
            ModelTurn.objects.filter(operation_id=self.operation_id, index__lte=self.index)
            .order_by("index")
            .values_list("request_items", flat=True)
        )
        body = dict(self.request_frame)
        body[field] = [*body.get(field, []), *chain.from_iterable(earlier)]
        return body


class ToolCall(models.Model):
    """One call the model proposed, from proposal to its one result envelope."""

    public_id = models.CharField(max_length=40, unique=True, default=new_call_id)
    operation = models.ForeignKey(  # indexed first in call_unique_per_response
        Operation, on_delete=models.PROTECT, related_name="calls", db_index=False
    )
    turn = models.ForeignKey(ModelTurn, on_delete=models.PROTECT, related_name="calls")
    position = models.PositiveIntegerField(help_text="Order in the reply, from 0.")
    response_id = models.TextField()
    provider_call_id = models.TextField(help_text="The provider's call ID.")
    provider_call_id_synthesized = models.BooleanField(
        default=False, help_text="The provider sent no call ID; the adapter derived this one."
    )
    item_id = models.TextField(blank=True)
    tool_name = models.TextField(help_text="As the model wrote it; resolved through the registry.")
    # null: the provider sent an object, not text (distinct from an empty argument string).
    raw_arguments = models.TextField(null=True, blank=True)  # noqa: DJ001
    arguments = models.JSONField(null=True, blank=True)
    arguments_sha256 = models.CharField(max_length=64, blank=True)
    arguments_edited = models.BooleanField(
        default=False, help_text="An operator edited the arguments when approving."
    )
    request_sha256 = models.CharField(max_length=64, blank=True)
    schema_version = models.CharField(max_length=80, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=20, choices=CallState.choices, default=CallState.PROPOSED)
    attempt = models.PositiveIntegerField(default=0)
    key_waits = models.PositiveIntegerField(
        default=0, help_text="Times it waited for an identical request holding its key."
    )
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was handed to a worker (parallelism bound)."
    )
    lease_token = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    error_code = models.CharField(max_length=60, blank=True)
    model_result = models.JSONField(null=True, blank=True)
    protected_audit = models.JSONField(null=True, blank=True)
    result_sha256 = models.CharField(max_length=64, blank=True)
    binding_sha256 = models.CharField(max_length=64, blank=True)
    # The revisions the result is bound to, stored when the call settles: a deploy while its
    # call set waits (a sibling parked for a human) does not unbind a result that already ran.
    tool_revisions = models.JSONField(
        null=True, blank=True, help_text="Tool revisions and schema version when it settled."
    )
    policy_revision = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["operation", "response_id", "provider_call_id"],
                name="call_unique_per_response",
            ),
            _state_check("call", CallState),
        ]
        indexes = [
            models.Index(fields=["state", "updated_at"], name="call_state_updated"),
            # Support staff find an operation by any ID: these serve the console search.
            models.Index(fields=["provider_call_id"], name="call_provider_id"),
            models.Index(fields=["idempotency_key"], name="call_idempotency_key"),
        ]
        ordering = ["operation", "turn", "position"]

    def __str__(self) -> str:
        return f"{self.public_id} {shown_plain(self.tool_name)}"  # the name as the model wrote it


class IdempotencyRecord(models.Model):
    """At most one effect per business intent, unique on (tenant, tool, key)
    (:mod:`toolcalls.services.idempotency`)."""

    class State(models.TextChoices):
        IN_FLIGHT = "IN_FLIGHT"
        DONE = "DONE"

    tenant = models.ForeignKey(  # indexed first in idempotency_unique_key
        Tenant, on_delete=models.PROTECT, db_index=False
    )
    tool_name = models.CharField(max_length=200)
    key = models.CharField(max_length=200)
    request_sha256 = models.CharField(max_length=64)
    state = models.CharField(max_length=20, choices=State.choices, default=State.IN_FLIGHT)
    call = models.ForeignKey(ToolCall, on_delete=models.PROTECT, related_name="+")
    model_result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "tool_name", "key"], name="idempotency_unique_key"
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=["IN_FLIGHT", "DONE"]),
                name="idempotency_state_valid",
            ),
        ]
        indexes = [models.Index(fields=["key"], name="idempotency_key_lookup")]

    def __str__(self) -> str:
        return f"{self.tool_name}:{shown_plain(self.key)}"  # the key from the model's arguments


class AppendOnlyQuerySet(models.QuerySet["AuditEvent"]):
    def delete(self) -> tuple[int, dict[str, int]]:
        raise PermissionError("audit events are append-only")

    def update(self, **kwargs: Any) -> int:
        raise PermissionError("audit events are append-only")


class AuditEvent(models.Model):
    """One append-only, hash-chained entry of an operation's timeline.

    ``hash`` is SHA-256 over the canonical JSON of the event's fields and ``prev_hash`` (the hash
    of the operation's previous event), so altering or removing an event breaks the chain.
    """

    operation = models.ForeignKey(  # indexed first in audit_unique_seq
        Operation, on_delete=models.PROTECT, related_name="events", db_index=False
    )
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=60, choices=AuditKind.choices)
    call = models.ForeignKey(
        ToolCall, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    approval_ref = models.CharField(max_length=40, blank=True)
    actor = models.CharField(max_length=200)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64, blank=True)
    hash = models.CharField(max_length=64)

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["operation", "seq"], name="audit_unique_seq"),
        ]
        indexes = [models.Index(fields=["approval_ref"], name="audit_approval_ref")]
        ordering = ["operation", "seq"]

    def __str__(self) -> str:
        return f"{self.operation_id}#{self.seq} {self.kind}"

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise PermissionError("audit events are append-only")
