"""What the approvals list's ``tool`` and ``operation`` filters may name
(``GET /api/v1/approvals?tool=&operation=``).

A name the tenant's approvals can never hold is refused (400 ``invalid_request``), as an unknown
``state`` or ``risk`` is, instead of listing nothing: a typo must not read as "no approvals".
A name is known when it is a tool of the tenant's catalogue, deployed or remote, enabled or not
(an approval made while a tool was enabled keeps its name), or when one of the tenant's
approvals names it (a tool a later deploy removed keeps its history). An operation is known
when it is the tenant's.
"""

from __future__ import annotations

from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from toolcalls import registry
from toolcalls.models import Operation, Tenant
from toolcalls.remote.models import RemoteTool


def approval_tool_names(*, tenant: Tenant) -> list[str]:
    """The tool names of ``tenant``'s catalogue, sorted: each deployed tool (the registry's,
    enabled for it or not) and each of its remote tools on record, enabled or not. One
    query."""
    remote = RemoteTool.objects.filter(tenant=tenant).values_list("name", flat=True)
    return sorted({*registry.names(), *remote})


def approvals_of_tool_exist(*, tenant: Tenant, name: str) -> bool:
    """Whether any of ``tenant``'s approvals, in any state, is of tool ``name``. One query,
    through index ``approval_tool_queue`` (state, tool name) with every state named: a probe per
    state, where a query naming no state would read the whole index for a name none has."""
    states = list(ApprovalState.values)
    return ApprovalRequest.objects.filter(tenant=tenant, state__in=states, tool_name=name).exists()


def tenant_operation_pk(*, tenant: Tenant, public_id: str) -> int | None:
    """The primary key of ``tenant``'s operation ``public_id`` (``op_…``), or ``None`` when it
    has none of that ID (another tenant's included). One query."""
    found = Operation.objects.filter(tenant=tenant, public_id=public_id)
    return found.values_list("pk", flat=True).first()
