"""Support admin for the engine's rows.

Everything but tenants is read-only here: operations, turns, calls, idempotency records and the
audit trail change only through ``toolcalls.services`` (one transition function, one audit
event). Search takes the IDs support is given, exactly (``__exact`` keeps the unique indexes in
use; Django's ``=`` prefix would compare ``UPPER()`` values).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from providers.families import ADAPTERS
from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.admin_base import (
    FamilyFilter,
    JsonAdminMixin,
    LargeTableAdminMixin,
    ReadOnlyAdminMixin,
    ShownTextAdminMixin,
    SuperuserEditableAdminMixin,
    TenantScopedAdminMixin,
    ToolFilter,
)
from toolcalls.errors import CallgateError
from toolcalls.models import (
    AgentProfile,
    AgentRevision,
    AuditEvent,
    IdempotencyRecord,
    ModelTurn,
    Operation,
    ReplayScript,
    Tenant,
    TenantTool,
    ToolCall,
)
from toolcalls.registry import RISKS
from toolcalls.remote.models import RemoteEvent, RemoteServer, RemoteTool
from toolcalls.remote.services import (
    HttpToolForm,
    Review,
    ServerForm,
    remote_http_tool_register,
    remote_server_discover,
    remote_server_register,
    remote_tool_disable,
    remote_tool_enable,
)
from toolcalls.services.agents import (
    AgentDefinition,
    agent_create,
    agent_definition_check,
    agent_revise,
)
from toolcalls.services.catalogue import CatalogueError, overrides_check, tenant_tool_set
from toolcalls.text import plain
from toolcalls.typed_json import typed_json

#: A call's raw argument text: up to the stream limit (a megabyte), never shown in a list.
_CALL_RAW_ARGUMENTS = "call__raw_arguments"

_JSON_NAMES: dict[type, str] = {dict: "object", list: "array"}


class ExactJsonField(forms.JSONField):
    """JSON typed into an admin form, read as the API reads a body
    (:func:`~toolcalls.typed_json.typed_json`). Only a JSON ``kind`` (``dict`` or ``list``) is
    taken; blank is an empty one. The text is shown again as typed."""

    def __init__(self, *, kind: type, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind = kind

    def to_python(self, value: Any) -> Any:
        if value in self.empty_values:
            return self.kind()
        parsed = typed_json(value)
        if not isinstance(parsed, self.kind):
            raise forms.ValidationError(f"Write a JSON {_JSON_NAMES[self.kind]}.")
        return parsed

    def bound_data(self, data: Any, initial: Any) -> Any:
        return None if data is None else InvalidJSONInput(data)

    def prepare_value(self, value: Any) -> Any:
        """Nothing yet shows as blank (which reads as an empty one), not ``null``."""
        return "" if value is None else super().prepare_value(value)


class TenantForm(forms.ModelForm):
    class Meta:
        model = Tenant
        fields = ("slug", "name", "is_active", "members")

    def clean_name(self) -> str:
        """A name shown on one line: every character shows, plain spaces aside
        (:func:`~toolcalls.text.plain`, the rule for API keys' names)."""
        name: str = self.cleaned_data["name"]
        if not plain(name):
            raise forms.ValidationError("A name has only characters that show, and plain spaces.")
        return name


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    form = TenantForm
    tenant_lookup = "pk"
    list_display = ("slug", "name", "is_active")
    list_filter = ("is_active",)
    search_fields = ("slug", "name")
    filter_horizontal = ("members",)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Every row of a tenant protects it; deactivate (is_active) instead.
        return False

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        if not change:
            obj.save()
            return
        # Only what the form changed: the catalogue revision (and the webhook flag) belong to
        # their services, and writing back the copy this form loaded could undo a change made
        # meanwhile, leaving processes on a catalogue they should have reloaded.
        obj.save(update_fields=[name for name in form.changed_data if name != "members"])


class TenantToolForm(forms.ModelForm):
    """A tenant's settings of one registered tool; overrides checked as the service checks
    them, each refusal shown on its field."""

    tool_name = forms.ChoiceField(choices=lambda: [(name, name) for name in registry.names()])

    class Meta:
        model = TenantTool
        fields = ("tenant", "tool_name", "enabled", "max_calls", "approval", "approval_threshold")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:  # a value the form could not read is no override to check
            return data
        try:
            overrides_check(
                tool_name=data.get("tool_name") or self.instance.tool_name,
                max_calls=data.get("max_calls"),
                approval=data.get("approval", ""),
                approval_threshold=data.get("approval_threshold"),
            )
        except CatalogueError as exc:
            field = exc.details.get("field", "tool_name")
            self.add_error(field if field in self.fields else None, exc.message)
        return data


@admin.register(TenantTool)
class TenantToolAdmin(TenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    """Tenants' tool catalogues. Saved through the catalogue service (the tenant's catalogue
    revision changes with it); a tool is disabled, never deleted, so calls of it that already
    ran stay answerable."""

    form = TenantToolForm
    list_display = ("tool_name", "tenant", "enabled", "max_calls", "approval", "updated_by")
    list_select_related = ("tenant",)
    list_filter = ("enabled", ToolFilter)
    search_fields = ("tool_name", "tenant__slug")
    readonly_fields = ("updated_by", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # Which tenant and tool a row is about never changes: its history is about them.
        return (*self.readonly_fields, *(("tenant", "tool_name") if obj else ()))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: TenantTool, form: Any, change: bool) -> None:
        saved = tenant_tool_set(
            tenant=obj.tenant,
            tool_name=obj.tool_name,
            enabled=obj.enabled,
            actor=Actor.user(request.user),
            max_calls=obj.max_calls,
            approval=obj.approval,
            approval_threshold=obj.approval_threshold,
        )
        obj.pk = saved.pk


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
    ShownTextAdminMixin,
    admin.ModelAdmin,
):
    json_fields = ("conversation", "tool_names", "budgets", "calls_per_tool")
    shown_fields = ("subject_ref",)
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
    ShownTextAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "operation__tenant"
    json_fields = ("request_body", "reply")
    shown_fields = ("response_id",)
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
    ShownTextAdminMixin,
    admin.ModelAdmin,
):
    tenant_lookup = "operation__tenant"
    json_fields = ("arguments", "model_result", "protected_audit")
    shown_fields = ("response_id", "provider_call_id", "item_id", "tool_name", "idempotency_key")
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
    ShownTextAdminMixin,
    admin.ModelAdmin,
):
    json_fields = ("model_result",)
    shown_fields = ("key",)
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


# --- Remote tools -------------------------------------------------------------------------------
# Registering a server, reviewing a tool and registering an HTTP tool are services that may talk
# to the server; each has its own page (a plain form, then the service, outside any
# transaction the admin would open) instead of the model change form.


class RemoteServerAddForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("slug"))
    name = forms.CharField(max_length=30, help_text="Prefix of its tools' names (shop → shop__x).")
    kind = forms.ChoiceField(choices=RemoteServer.Kind.choices)
    url = forms.URLField(
        assume_scheme="https", max_length=500, required=False, help_text="MCP: its endpoint."
    )
    command = forms.CharField(required=False, help_text="MCP over stdio (where allowed).")
    headers = ExactJsonField(kind=dict, required=False, help_text='{"Authorization": "…"}')
    signing_secret = forms.CharField(max_length=100, required=False, help_text="HTTP tools.")


class RemoteHttpToolAddForm(forms.Form):
    server = forms.ModelChoiceField(queryset=RemoteServer.objects.filter(kind="http"))
    name = forms.CharField(max_length=128)
    description = forms.CharField(widget=forms.Textarea, required=False)
    input_schema = ExactJsonField(kind=dict, help_text="JSON Schema of the arguments object.")
    url = forms.URLField(assume_scheme="https", max_length=500)
    reconcile_url = forms.URLField(assume_scheme="https", max_length=500, required=False)


class RemoteToolReviewForm(forms.Form):
    enabled = forms.BooleanField(required=False, help_text="Enabling pins the served revision.")
    risk = forms.ChoiceField(choices=[(risk, risk) for risk in RISKS])
    timeout_ms = forms.IntegerField(min_value=1)
    approval = forms.ChoiceField(choices=RemoteTool.Approval.choices)
    approval_condition = forms.CharField(max_length=200, required=False)
    key_context = ExactJsonField(kind=list, required=False, help_text='["subject_ref"]')
    key_arguments = ExactJsonField(kind=list, required=False, help_text='["order_id"]')


def _form_page(
    request: HttpRequest,
    form: forms.Form,
    title: str,
    submit: str,
    facts: list[tuple[str, Any]] | None = None,
) -> TemplateResponse:
    context = {**admin.site.each_context(request), "form": form, "title": title}
    context |= {"submit": submit, "facts": facts or []}
    return TemplateResponse(request, "admin/remote/form.html", context)


@admin.register(RemoteServer)
class RemoteServerAdmin(TenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    list_display = ("name", "tenant", "kind", "url", "created_at")
    list_filter = ("kind",)
    readonly_fields = ("tenant", "name", "kind", "url", "command", "created_at")
    exclude = ("headers", "signing_secret")
    actions = ("discover",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its address, headers and secret change through the API (PATCH), audited

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Its append-only events (``server_registered`` at least) protect it: deleting could
        # never succeed. Its tools are retired by disabling them.
        return False

    def has_discover_permission(self, request: HttpRequest) -> bool:
        """Listing tools again writes them: superusers only, as registering and reviewing."""
        return request.user.is_superuser

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> Any:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = RemoteServerAddForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = {**form.cleaned_data, "command": form.cleaned_data["command"].split()}
            tenant = data.pop("tenant")
            try:
                server = remote_server_register(
                    tenant=tenant, form=ServerForm(**data), actor=Actor.user(request.user)
                )
            except CallgateError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, f"Registered {server}; review its tools.")
                return redirect("admin:remote_remotetool_changelist")
        return _form_page(request, form, "Register a remote server", "Register")

    @admin.action(
        permissions=["discover"], description="List the selected MCP servers' tools again"
    )
    def discover(self, request: HttpRequest, queryset: QuerySet[RemoteServer]) -> None:
        for server in queryset.filter(kind=RemoteServer.Kind.MCP):
            try:
                remote_server_discover(server_pk=server.pk, actor=Actor.user(request.user))
            except CallgateError as exc:
                messages.error(request, f"{server}: {exc.message}")
            else:
                messages.success(request, f"{server}: tools listed again.")


@admin.register(RemoteTool)
class RemoteToolAdmin(
    TenantScopedAdminMixin, SuperuserEditableAdminMixin, JsonAdminMixin, admin.ModelAdmin
):
    json_fields = ("input_schema", "annotations")
    list_display = ("name", "server", "enabled", "risk", "approval", "changed", "problem")
    list_filter = ("enabled", "server__kind")
    search_fields = ("name__exact",)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Its append-only events (``tool_discovered`` at least) protect it: deleting could
        # never succeed. A tool is retired by disabling it (the review page), which keeps what
        # its calls and approvals name.
        return False

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> Any:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = RemoteHttpToolAddForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = dict(form.cleaned_data)
            server = data.pop("server")
            try:
                remote_http_tool_register(
                    server_pk=server.pk, form=HttpToolForm(**data), actor=Actor.user(request.user)
                )
            except CallgateError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, "Registered; review it to enable it.")
                return redirect("admin:remote_remotetool_changelist")
        return _form_page(request, form, "Register an HTTP tool", "Register")

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        """The review page. An ID naming no tool the user sees (malformed, another tenant's)
        or a tool the user may not change gets Django's own answer."""
        tool = self.get_object(request, unquote(object_id))
        if tool is None or not self.has_change_permission(request, tool):
            return super().change_view(request, object_id, form_url, extra_context)
        form = RemoteToolReviewForm(request.POST or None, initial=_review_initial(tool))
        if request.method == "POST" and form.is_valid():
            try:
                _review_apply(tool, form.cleaned_data, Actor.user(request.user))
            except CallgateError as exc:
                form.add_error(None, exc.message)
            else:
                messages.success(request, f"{tool.name} saved.")
                return redirect("admin:remote_remotetool_changelist")
        return _form_page(request, form, f"Review {tool.name}", "Save", _tool_facts(tool))


def _review_initial(tool: RemoteTool) -> dict[str, Any]:
    names = ("enabled", "risk", "timeout_ms", "approval", "approval_condition")
    initial = {name: getattr(tool, name) for name in names}
    return initial | {"key_context": tool.key_context, "key_arguments": tool.key_arguments}


def _review_apply(tool: RemoteTool, data: dict[str, Any], actor: Actor) -> None:
    fields = dict(data)
    if fields.pop("enabled"):
        remote_tool_enable(tool_pk=tool.pk, review=Review(**fields), actor=actor)
    else:
        remote_tool_disable(tool_pk=tool.pk, actor=actor)


def _tool_facts(tool: RemoteTool) -> list[tuple[str, Any]]:
    return [
        ("served as", f"{tool.remote_name} on {tool.server}"),
        ("description", tool.description),
        ("input schema", json.dumps(tool.input_schema, indent=2)),
        ("annotations (hints only)", json.dumps(tool.annotations, indent=2)),
        ("served revision", tool.served_sha256),
        ("enabled revision", tool.pinned_sha256 or "none"),
        ("cannot be enabled", tool.problem or "—"),
    ]


@admin.register(RemoteEvent)
class RemoteEventAdmin(
    TenantScopedAdminMixin, ReadOnlyAdminMixin, JsonAdminMixin, admin.ModelAdmin
):
    json_fields = ("details",)
    list_display = ("created_at", "kind", "server", "tool", "actor")
    list_filter = ("kind",)


class AgentProfileForm(forms.ModelForm):
    """A profile's name and tenant (on creation), and the definition of its next revision,
    checked as the service checks it; the form starts from the latest revision."""

    family = forms.ChoiceField(choices=[(f, f) for f in sorted(ADAPTERS)])
    model = forms.CharField(max_length=100)
    instructions = forms.CharField(widget=forms.Textarea, required=False, strip=False)
    settings = ExactJsonField(
        kind=dict, initial=dict, required=False, help_text="ModelSettings by name."
    )
    tools = ExactJsonField(
        kind=list,
        required=False,
        help_text="Tool names, in order; empty: every tool of the tenant.",
    )
    budgets = ExactJsonField(kind=dict, initial=dict, required=False, help_text="Guard overrides.")
    approval_overrides = ExactJsonField(
        kind=dict,
        initial=dict,
        required=False,
        help_text=AgentRevision._meta.get_field("approval_overrides").help_text,
    )
    note = forms.CharField(max_length=500, required=False, help_text="What changed, for people.")

    class Meta:
        model = AgentProfile
        fields = ("tenant", "name")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            latest = self.instance.revisions.get(number=self.instance.latest_revision)
            for name in ("family", "model", "instructions", "settings", "budgets"):
                self.initial[name] = getattr(latest, name)
            self.initial["tools"] = latest.tool_names
            self.initial["approval_overrides"] = latest.approval_overrides

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        tenant = data.get("tenant") or getattr(self.instance, "tenant", None)
        if tenant is None or self.errors:
            return data
        try:
            self.definition = agent_definition_check(tenant=tenant, definition=self._asked(data))
        except CallgateError as exc:
            named = next(iter(exc.details.get("fields", {})), "").split(".")[0]
            field = _ADMIN_FIELDS.get(exc.code, named if named in self.fields else None)
            self.add_error(field, exc.message)
        return data

    def _asked(self, data: dict[str, Any]) -> AgentDefinition:
        return AgentDefinition(
            family=data["family"],
            model=data["model"],
            instructions=data.get("instructions", ""),
            settings=data.get("settings") or {},
            tool_names=data.get("tools") or None,
            budgets=data.get("budgets") or {},
            approval_overrides=data.get("approval_overrides") or {},
        )


#: The form field each refusal of the definition is about (``None``: the form as a whole).
_ADMIN_FIELDS = {
    "unknown_family": "family",
    "unknown_tool": "tools",
    "unsupported_setting": "settings",
    "bad_budget": "budgets",
}


class AgentRevisionInline(admin.TabularInline):
    model = AgentRevision
    fields = ("number", "family", "model", "note", "created_by", "created_at")
    readonly_fields = fields
    ordering = ("-number",)
    extra = 0
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentProfile)
class AgentProfileAdmin(TenantScopedAdminMixin, SuperuserEditableAdminMixin, admin.ModelAdmin):
    """Create a profile (its revision 1) or change it: saving writes a new revision, never
    changing an old one. Profiles are not deleted (operations keep their revisions)."""

    form = AgentProfileForm
    inlines = (AgentRevisionInline,)
    list_display = ("name", "tenant", "latest_revision", "updated_at")
    list_select_related = ("tenant",)
    search_fields = ("name",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("tenant", "name") if obj is not None else ()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        actor = Actor.user(request.user)
        note = form.cleaned_data.get("note", "")
        if change:
            shown = obj.latest_revision
            revision = agent_revise(profile=obj, changes=form.definition, actor=actor, note=note)
            # Read by ``response_change``: the service kept the latest revision, nothing changed.
            obj.revision_kept = revision.number == shown
            obj.latest_revision = revision.number
            return
        revision = agent_create(
            tenant=obj.tenant, name=obj.name, definition=form.definition, actor=actor, note=note
        )
        obj.pk, obj._state.adding = revision.profile.pk, False

    def response_change(self, request: HttpRequest, obj: Any) -> Any:
        """Saved unchanged: say that it stays at its revision (and that a note alone is not
        kept), not Django's "changed successfully"; then go where the button asked."""
        if not getattr(obj, "revision_kept", False):
            return super().response_change(request, obj)
        noted = request.POST.get("note", "").strip()
        unkept = " The note is kept only with a change." if noted else ""
        message = f"Nothing changed: {obj} stays at revision {obj.latest_revision}.{unkept}"
        self.message_user(request, message, messages.INFO)
        if "_continue" in request.POST:
            return redirect(request.get_full_path())
        if "_addanother" in request.POST:
            return redirect("admin:toolcalls_agentprofile_add")
        return self.response_post_save_change(request, obj)


@admin.register(AgentRevision)
class AgentRevisionAdmin(
    TenantScopedAdminMixin, ReadOnlyAdminMixin, JsonAdminMixin, admin.ModelAdmin
):
    tenant_lookup = "profile__tenant"
    json_fields = ("settings", "tool_names", "budgets", "approval_overrides")
    list_display = ("__str__", "family", "model", "created_by", "created_at")
    list_select_related = ("profile",)
    search_fields = ("profile__name",)
