"""The tools an operation may use, resolved per tenant (DESIGN.md §5).

The registry holds the tools deployed with Callgate; :mod:`toolcalls.remote` adds the tools a
tenant's administrators enabled on its MCP servers and HTTP endpoints (their names carry their
server's prefix, so they never shadow a deployed tool). The catalogue answers, for one operation,
which tool a name means and with which effective settings: the one place the engine looks a
tool up. Model output only ever selects a key of the operation's own ``tool_names``.
"""

from __future__ import annotations

from providers.base import ToolDeclaration
from toolcalls import registry
from toolcalls.models import Operation, Tenant
from toolcalls.registry import ToolSpec
from toolcalls.remote.specs import tenant_tool_names, tenant_tool_spec


def tool_spec(operation: Operation, name: str) -> ToolSpec | None:
    """The spec ``operation`` runs ``name`` with, or ``None`` when its tenant has no such tool
    (the caller answers ``UNKNOWN_TOOL`` or refuses). Whether ``name`` was offered to this
    operation is the validation chain's check (``operation.tool_names``)."""
    return registry.get(name) or tenant_tool_spec(tenant_id=operation.tenant_id, name=name)


def tool_names(tenant: Tenant) -> list[str]:
    """Every tool name ``tenant`` may use, sorted."""
    return sorted([*registry.names(), *tenant_tool_names(tenant_id=tenant.pk)])


def declarations(operation: Operation) -> list[ToolDeclaration]:
    """Declarations of the tools offered to ``operation``, in its ``tool_names`` order."""
    specs = (tool_spec(operation, name) for name in operation.tool_names)
    return [spec.declaration() for spec in specs if spec is not None]
