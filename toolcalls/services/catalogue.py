"""Change a tenant's tool catalogue: which registered tools it may use, with which overrides.

Reads go through :mod:`toolcalls.catalogue`, the engine's one lookup; this is the one writer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TypedDict

from django.conf import settings
from django.db import transaction

from toolcalls import registry
from toolcalls.actors import Actor
from toolcalls.errors import CallgateError
from toolcalls.models import Tenant, TenantTool, new_catalogue_revision
from toolcalls.registry import ToolSpec

log = logging.getLogger("callgate.catalogue")


class CatalogueError(CallgateError):
    """A catalogue change that cannot be made. ``code``: ``unknown_tool`` (no registered tool
    of that name) or ``invalid_override`` (``details.field`` names the override that is not
    within what the tool spec and the guard limits allow)."""


class Overrides(TypedDict):
    """A tenant's overrides of one tool (see :func:`tenant_tool_set`)."""

    max_calls: int | None
    approval: str
    approval_threshold: int | None


def tenant_tool_set(
    *,
    tenant: Tenant,
    tool_name: str,
    enabled: bool,
    actor: Actor,
    max_calls: int | None = None,
    approval: str = "",
    approval_threshold: int | None = None,
) -> TenantTool:
    """Put registered tool ``tool_name`` in ``tenant``'s catalogue with exactly these settings,
    replacing earlier ones (disabling keeps the row: calls of the tool that already ran stay
    answerable). Overrides: ``max_calls`` per operation, 1 to the guard limit of
    ``max_calls_per_tool`` and the spec's own; ``approval`` ``""`` (the spec's policy),
    ``"always"``, or ``"threshold"`` with ``approval_threshold`` below the spec's threshold in
    its unit. Raises :class:`CatalogueError`."""
    overrides: Overrides = {
        "max_calls": max_calls,
        "approval": approval,
        "approval_threshold": approval_threshold,
    }
    overrides_check(tool_name=tool_name, **overrides)
    with _catalogue_change(tenant, actor) as locked:
        row, _ = TenantTool.objects.update_or_create(
            tenant=locked,
            tool_name=tool_name,
            defaults={"enabled": enabled, "updated_by": actor.audit_name, **overrides},
        )
    log.info(
        "catalogue tenant=%s tool=%s enabled=%s overrides=%s actor=%s",
        tenant.slug,
        tool_name,
        enabled,
        overrides,
        actor,
    )
    return row


def tenant_tools_enable(*, tenant: Tenant, tool_names: Sequence[str], actor: Actor) -> None:
    """Add each registered tool of ``tool_names`` that ``tenant``'s catalogue lacks, enabled
    and without overrides (rows already there, enabled or not, stay as they are). Raises
    :class:`CatalogueError` (``unknown_tool``)."""
    unknown = [name for name in tool_names if registry.get(name) is None]
    if unknown:
        raise CatalogueError("unknown_tool", f"no registered tools named {', '.join(unknown)}")
    with _catalogue_change(tenant, actor) as locked:
        present = set(TenantTool.objects.filter(tenant=locked).values_list("tool_name", flat=True))
        missing = [name for name in dict.fromkeys(tool_names) if name not in present]
        TenantTool.objects.bulk_create(
            TenantTool(tenant=locked, tool_name=name, updated_by=actor.audit_name)
            for name in missing
        )
    if missing:
        log.info("catalogue tenant=%s enabled=%s actor=%s", tenant.slug, ",".join(missing), actor)


@contextmanager
def _catalogue_change(tenant: Tenant, actor: Actor) -> Iterator[Tenant]:
    """A transaction holding ``tenant``'s row locked (catalogue changes of one tenant run one
    at a time); the catalogue gets a new revision with the change, on ``tenant`` too."""
    with transaction.atomic():
        locked = Tenant.objects.select_for_update().get(pk=tenant.pk)
        yield locked
        locked.catalogue_revision = new_catalogue_revision()
        locked.save(update_fields=["catalogue_revision"])
    tenant.catalogue_revision = locked.catalogue_revision


def overrides_check(
    *, tool_name: str, max_calls: int | None, approval: str, approval_threshold: int | None
) -> None:
    """Raise :class:`CatalogueError` unless ``tool_name`` is registered and the overrides are
    within what its spec and the guard limits allow (see :func:`tenant_tool_set`)."""
    spec = registry.get(tool_name)
    if spec is None:
        raise CatalogueError("unknown_tool", f"there is no registered tool named {tool_name!r}")
    _check_overrides(spec, max_calls, approval, approval_threshold)


def _check_overrides(
    spec: ToolSpec, max_calls: int | None, approval: str, approval_threshold: int | None
) -> None:
    limit = min(settings.CALLGATE_GUARD_LIMITS["max_calls_per_tool"], spec.max_calls or 1 << 62)
    if max_calls is not None and not 1 <= max_calls <= limit:
        _refuse("max_calls", f"max_calls must be between 1 and {limit}")
    if approval not in TenantTool.Approval.values:
        _refuse("approval", 'approval must be "always", "threshold" or empty')
    threshold = approval == TenantTool.Approval.THRESHOLD
    if not threshold and approval_threshold is not None:
        _refuse("approval_threshold", 'approval_threshold goes with approval "threshold" only')
    terms = spec.approval.threshold
    if threshold and terms is None:
        _refuse("approval", f"{spec.name}'s approval policy has no threshold to lower")
    if terms is not None and threshold:
        current = terms.limit()
        rule = f"a whole number at least 0 and below {current} {terms.unit}, the spec's"
        if approval_threshold is None:
            _refuse("approval_threshold", f'approval "threshold" needs approval_threshold: {rule}')
        elif not 0 <= approval_threshold < current:
            _refuse("approval_threshold", f"approval_threshold must be {rule}")


def _refuse(field: str, message: str) -> None:
    raise CatalogueError("invalid_override", message, details={"field": field})
