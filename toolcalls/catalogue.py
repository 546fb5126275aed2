"""The tools an operation may use, resolved per tenant (docs/design.md §5).

The registry holds the tools deployed with Callgate; a tenant's catalogue (``TenantTool`` rows)
says which of them the tenant may use and with which overrides. :mod:`toolcalls.remote` adds the
tools a tenant's administrators enabled on its MCP servers and HTTP endpoints (their names carry
their server's prefix, so they never shadow a deployed tool). The catalogue answers, for one
operation, which tool a name means and with which effective settings: the one place the engine
looks a tool up. Model output only ever selects a key of the operation's own ``tool_names``.

Effective spec: the registry's spec with the tenant's overrides applied, each only ever stricter
(a per-operation call limit below the spec's, an approval policy of ``always`` or a lower
threshold). An overridden policy has its own revision string, derived from the spec's and the
override, so a call parked before an override changed revalidates to ``APPROVAL_STALE``.

A disabled tool still resolves (:func:`tool_spec`): calls of it that already ran must still be
bound, reconciled and answered. It is no longer offered (:func:`declarations`,
:func:`tool_names`), a new call of it is ``UNKNOWN_TOOL`` (:func:`enabled`, checked by the
validation chain) and a call parked for it revalidates to ``APPROVAL_STALE``.

Cost: the engine resolves a tool per call. A process keeps each tenant's rows, and the effective
specs built from them, for as long as the tenant row it reads carries the same
``catalogue_revision`` (every change writes a new one in its transaction), so a lookup costs no
query while the catalogue is unchanged. A remote tool resolves only while it is enabled (its
own rows say so; :mod:`toolcalls.remote.specs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from providers.base import ToolDeclaration
from toolcalls import policy, registry
from toolcalls.models import Operation, Tenant, TenantTool
from toolcalls.policy import ApprovalPolicy, above_threshold, always
from toolcalls.registry import ToolSpec
from toolcalls.remote.models import RemoteServer, RemoteTool
from toolcalls.remote.specs import (
    remote_spec,
    tenant_tool,
    tenant_tool_names,
    tenant_tool_spec,
    tenant_tools,
)


@dataclass
class _Loaded:
    """One tenant's catalogue as loaded at ``revision``: rows by tool name, and the effective
    spec built for each name with the registry spec it was built from."""

    revision: str
    rows: dict[str, TenantTool]
    specs: dict[str, tuple[ToolSpec, ToolSpec]] = field(default_factory=dict)


_loaded: dict[int, _Loaded] = {}


def _catalogue(tenant: Tenant) -> _Loaded:
    loaded = _loaded.get(tenant.pk)
    if loaded is None or loaded.revision != tenant.catalogue_revision:
        rows = TenantTool.objects.filter(tenant_id=tenant.pk)
        loaded = _Loaded(tenant.catalogue_revision, {row.tool_name: row for row in rows})
        _loaded[tenant.pk] = loaded
    return loaded


def tool_spec(operation: Operation, name: str) -> ToolSpec | None:
    """The spec ``operation`` runs ``name`` with (a deployed tool enabled or disabled for its
    tenant, or an enabled remote tool), or ``None`` when the tenant has no such tool (the
    caller answers ``UNKNOWN_TOOL`` or refuses). Whether ``name`` was offered to this operation
    is the validation chain's check (``operation.tool_names``). The agent revision the operation
    was started from adds its approval overrides (:func:`agent_approval`)."""
    spec = tenant_spec(operation.tenant, name) or tenant_tool_spec(
        tenant_id=operation.tenant_id, name=name
    )
    return None if spec is None else agent_approval(operation, spec)


def tenant_spec(tenant: Tenant, name: str) -> ToolSpec | None:
    """The spec ``tenant`` has for ``name`` (see :func:`tool_spec`)."""
    spec = registry.get(name)
    loaded = _catalogue(tenant)
    row = loaded.rows.get(name)
    if spec is None or row is None:
        return None
    built = loaded.specs.get(name)
    if built is None or built[0] is not spec:  # a deploy replaced the registry's spec
        built = (spec, effective_spec(spec, row))
        loaded.specs[name] = built
    return built[1]


@dataclass(frozen=True)
class Entry:
    """One tool as a tenant has it: its catalogue ``row`` (``None``: not in the catalogue, or
    a remote tool, which its own rows govern), its effective ``spec``, whether it is
    ``enabled``, and the ``server`` of a remote tool (``None``: deployed with Callgate)."""

    row: TenantTool | None
    spec: ToolSpec
    enabled: bool
    server: RemoteServer | None = None

    @property
    def own(self) -> ToolSpec:
        """The spec without the tenant's overrides (a remote tool's review is its own)."""
        return (None if self.server else registry.get(self.spec.name)) or self.spec


def entry(tenant: Tenant, name: str) -> Entry | None:
    """Tool ``name`` as ``tenant`` has it: a registered tool, or one of its enabled remote
    tools; ``None`` for any other name."""
    base = registry.get(name)
    if base is None:
        remote = tenant_tool(tenant_id=tenant.pk, name=name)
        return _remote_entry(remote) if remote else None
    row = _catalogue(tenant).rows.get(name)
    enabled = row is not None and row.enabled
    return Entry(row, tenant_spec(tenant, name) or base, enabled=enabled)


def _remote_entry(tool: RemoteTool) -> Entry:
    return Entry(None, remote_spec(tool), enabled=True, server=tool.server)


def entries(tenant: Tenant) -> list[Entry]:
    """Every tool ``tenant`` may use now (:func:`tool_names`), sorted by name: what
    ``GET /api/v1/tools`` lists and the console's Tools page shows. Queries: one for the
    remote tools, and one for the catalogue rows when they changed, whatever the number of
    tools."""
    deployed = (entry(tenant, name) for name in _deployed(tenant))
    remote = [_remote_entry(tool) for tool in tenant_tools(tenant_id=tenant.pk)]
    found = [*(one for one in deployed if one is not None), *remote]
    return sorted(found, key=lambda one: one.spec.name)


def enabled(operation: Operation, name: str) -> bool:
    """Whether ``operation``'s tenant may use ``name`` now (a remote tool: while it is
    enabled)."""
    row = _catalogue(operation.tenant).rows.get(name)
    if row is not None:
        return row.enabled
    return tenant_tool_spec(tenant_id=operation.tenant_id, name=name) is not None


def tool_names(tenant: Tenant) -> list[str]:
    """Every tool name ``tenant`` may use now, sorted: its enabled deployed tools and its
    enabled remote tools."""
    return sorted([*_deployed(tenant), *tenant_tool_names(tenant_id=tenant.pk)])


def _deployed(tenant: Tenant) -> list[str]:
    """Names of the registered tools enabled in ``tenant``'s catalogue."""
    rows = _catalogue(tenant).rows.values()
    return [row.tool_name for row in rows if row.enabled and registry.get(row.tool_name)]


def declarations(operation: Operation) -> list[ToolDeclaration]:
    """Declarations of the tools offered to ``operation`` and still enabled for its tenant, in
    its ``tool_names`` order."""
    specs = (tool_spec(operation, name) for name in operation.tool_names)
    return [spec.declaration() for spec in specs if spec and enabled(operation, spec.name)]


def effective_spec(spec: ToolSpec, row: TenantTool) -> ToolSpec:
    """``spec`` with the overrides of catalogue ``row`` applied (``spec`` itself without any)."""
    changes: dict[str, object] = {}
    if row.max_calls is not None:
        changes["max_calls"] = min(row.max_calls, spec.max_calls or row.max_calls)
    policy = _approval(spec.approval, row)
    if policy is not spec.approval:
        changes["approval"] = policy
    return replace(spec, **changes) if changes else spec  # type: ignore[arg-type]


def _approval(policy: ApprovalPolicy, row: TenantTool) -> ApprovalPolicy:
    """The stricter policy ``row`` asks for. A lower threshold on a spec that no longer has a
    threshold policy fails closed: every call waits for a human."""
    terms, cap = policy.threshold, row.approval_threshold
    if row.approval == TenantTool.Approval.THRESHOLD and terms is not None and cap is not None:
        return above_threshold(
            field=terms.field,
            unit=terms.unit,
            threshold=lambda: min(terms.limit(), cap),
            revision=f"{policy.revision}+tenant-threshold:{cap}",
        )
    if row.approval:
        reason = "this tenant has every call of this tool approved by a person"
        return always(reason, revision=f"{policy.revision}+tenant-always")
    return policy


def agent_approval(operation: Operation, spec: ToolSpec) -> ToolSpec:
    """``spec`` with the approval override of the agent revision ``operation`` was started
    from, if that revision has one for it (:func:`toolcalls.policy.stricter`: never looser than
    the tool's own policy). Its policy revision then names the agent revision,
    ``<tool policy revision>+<agent>@<n>``, so approvals and bindings check the revision the
    operation runs with, whatever revisions came after it."""
    if operation.agent_revision_id is None:
        return spec
    agent = operation.agent_revision
    assert agent is not None
    override = agent.approval_overrides.get(spec.name)
    if override is None:
        return spec
    revision = f"{spec.approval.revision}+{agent.label}"
    approval = policy.stricter(
        spec.approval, override, amount_field=spec.amount_field, revision=revision
    )
    return replace(spec, approval=approval)
