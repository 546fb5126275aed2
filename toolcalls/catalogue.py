"""The tools an operation may use, resolved per tenant (DESIGN.md §5).

The registry holds the tools deployed with Callgate. The catalogue answers, for one operation,
which tool a name means and with which effective settings: the one place the engine looks a
tool up. Model output only ever selects a key of the operation's own ``tool_names``.
"""

from __future__ import annotations

from dataclasses import replace

from providers.base import ToolDeclaration
from toolcalls import policy, registry
from toolcalls.models import Operation, Tenant
from toolcalls.registry import ToolSpec


def tool_spec(operation: Operation, name: str) -> ToolSpec | None:
    """The spec ``operation`` runs ``name`` with, or ``None`` when its tenant has no such tool
    (the caller answers ``UNKNOWN_TOOL`` or refuses). Whether ``name`` was offered to this
    operation is the validation chain's check (``operation.tool_names``)."""
    spec = registry.get(name)
    return None if spec is None else agent_approval(operation, spec)


def tool_names(tenant: Tenant) -> list[str]:
    """Every tool name ``tenant`` may use, sorted."""
    return registry.names()


def declarations(operation: Operation) -> list[ToolDeclaration]:
    """Declarations of the tools offered to ``operation``, in its ``tool_names`` order."""
    specs = (tool_spec(operation, name) for name in operation.tool_names)
    return [spec.declaration() for spec in specs if spec is not None]


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
