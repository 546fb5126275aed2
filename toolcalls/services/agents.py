"""Agent profiles: a tenant's named agents, each change a new immutable revision
(docs/design.md §5).

A revision holds what an operation started from it runs with: family, model, instructions,
model settings, tools, budget overrides and approval overrides. Revisions are numbered from 1
under the profile's row lock and never change afterwards; the revisions, with who made each and
when, are the profile's history. How a request combines with a revision:
:func:`toolcalls.services.operations.with_agent`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from django.db import IntegrityError, transaction

from toolcalls import catalogue, policy
from toolcalls.actors import Actor
from toolcalls.errors import CallgateError
from toolcalls.models import AgentProfile, AgentRevision, Tenant
from toolcalls.services.operations import (
    agent_tools_refusal,
    budgets_check,
    family_adapter,
    model_problem,
    settings_check,
    tool_names_check,
    tools_unavailable,
)

#: An agent's name: a slug of up to 40 characters, starting with a letter or digit.
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
#: A revision's number as a reference (``name@n``) and a path (``…/revisions/n``) write it: 1 to
#: 999999999 in ASCII digits without a leading zero, so a revision has one spelling (``01`` none).
REVISION = re.compile(r"[1-9][0-9]{0,8}")
#: ``name`` (the latest revision) or ``name@n`` (revision ``n``).
REFERENCE = re.compile(rf"(?P<name>{NAME.pattern})(?:@(?P<number>{REVISION.pattern}))?")


class AgentError(CallgateError):
    """A profile request Callgate refuses: ``invalid_agent`` (a bad name, model or approval
    override; ``details["fields"]`` names it), ``agent_exists`` or ``unknown_agent``."""


class AgentDefinition(TypedDict, total=False):
    """What a revision defines. ``family`` and ``model`` (up to 100 characters) are required
    for a new profile; ``instructions`` (default ``""``); ``settings``
    (:class:`~providers.base.ModelSettings` by name); ``tool_names`` (default: every tool the
    tenant may use now); ``budgets`` (guard overrides, :mod:`toolcalls.guards`);
    ``approval_overrides`` (tool name → :func:`toolcalls.policy.override_problem`'s shapes)."""

    family: str
    model: str
    instructions: str
    settings: Mapping[str, Any]
    tool_names: Sequence[str] | None
    budgets: Mapping[str, Any]
    approval_overrides: Mapping[str, Any]


def agent_definition_check(*, tenant: Tenant, definition: AgentDefinition) -> AgentDefinition:
    """``definition`` checked for ``tenant`` and completed with its defaults (the stored form).
    Raises :class:`AgentError` (``invalid_agent``) or
    :class:`~toolcalls.services.operations.OperationError` (``unknown_family``,
    ``unknown_tool``, ``unsupported_setting``, ``bad_budget``), as starting an operation
    with it would."""
    adapter = family_adapter(definition.get("family", ""))
    model = definition.get("model", "")
    if wrong := model_problem(model):
        raise _invalid("model", wrong)
    asked = definition.get("tool_names")
    if asked is not None and not all(isinstance(name, str) for name in asked):
        raise _invalid("tools", "name each tool with a JSON string")
    names = tool_names_check(tenant, asked)
    settings = settings_check(adapter, definition.get("settings"), names).as_dict()
    budgets = dict(definition.get("budgets") or {})
    budgets_check(budgets)
    overrides = dict(definition.get("approval_overrides") or {})
    for tool, override in overrides.items():
        # The tool as the tenant has it: a deployed tool or an enabled remote one, whose
        # overrides the engine applies alike (catalogue.agent_approval).
        found = catalogue.entry(tenant, tool) if tool in names else None
        spec = found.spec if found else None
        problem = (
            "not one of the agent's tools"
            if spec is None
            else policy.override_problem(override, amount_field=spec.amount_field)
        )
        if problem:
            raise _invalid(f"approval_overrides.{tool}", problem)
    return AgentDefinition(
        family=adapter.family,
        model=model,
        instructions=definition.get("instructions", ""),
        settings=settings,
        tool_names=names,
        budgets=budgets,
        approval_overrides=overrides,
    )


def _invalid(field: str, message: str) -> AgentError:
    return AgentError(
        "invalid_agent", f"{field}: {message}", details={"fields": {field: [message]}}
    )


def agent_create(
    *, tenant: Tenant, name: str, definition: AgentDefinition, actor: Actor, note: str = ""
) -> AgentRevision:
    """A new profile ``name`` of ``tenant`` with ``definition`` as its revision 1 (see
    :func:`agent_definition_check` for what it raises; ``agent_exists`` when the tenant has
    a profile of that name)."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        message = "lower-case letters, digits, - and _, up to 40, starting with a letter or digit"
        raise _invalid("name", message)
    checked = agent_definition_check(tenant=tenant, definition=definition)
    try:
        with transaction.atomic():
            profile = AgentProfile.objects.create(tenant=tenant, name=name)
            return _revision_add(profile, checked, actor=actor, note=note)
    except IntegrityError:
        raise AgentError("agent_exists", f"The tenant already has an agent {name!r}.") from None


def agent_revise(
    *, profile: AgentProfile, changes: AgentDefinition, actor: Actor, note: str = ""
) -> AgentRevision:
    """The next revision of ``profile``: its latest revision with ``changes`` applied (a field
    left out keeps its value). When that changes nothing the latest revision stays the latest
    and is returned (``note`` is kept only with a change): saving a definition unchanged makes
    no identical revision. Raises as :func:`agent_definition_check` does."""
    with transaction.atomic():
        locked = AgentProfile.objects.select_for_update().get(pk=profile.pk)
        latest = locked.revisions.get(number=locked.latest_revision)
        definition = AgentDefinition(
            family=latest.family,
            model=latest.model,
            instructions=latest.instructions,
            settings=latest.settings,
            tool_names=latest.tool_names,
            budgets=latest.budgets,
            approval_overrides=latest.approval_overrides,
        )
        definition.update(changes)
        if "tool_names" not in changes and (
            missing := tools_unavailable(locked.tenant, latest.tool_names)
        ):
            # Kept from the latest revision, not asked for: say whose they are and what to do.
            instead = "send the tools this revision should offer"
            raise _invalid("tools", agent_tools_refusal(latest, missing, instead=instead))
        checked = agent_definition_check(tenant=locked.tenant, definition=definition)
        if _defines(latest, checked):
            return latest
        return _revision_add(locked, checked, actor=actor, note=note)


def _defines(revision: AgentRevision, definition: AgentDefinition) -> bool:
    """Whether ``revision`` holds ``definition`` (in its stored form) already. Values compare
    as the JSON they are stored as: ``1`` and ``1.0`` or ``true`` differ, a mapping's key
    order does not."""
    return all(_json(getattr(revision, name)) == _json(value) for name, value in definition.items())


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _revision_add(
    profile: AgentProfile, definition: AgentDefinition, *, actor: Actor, note: str
) -> AgentRevision:
    """Number and save the next revision of ``profile`` (locked or just created)."""
    profile.latest_revision += 1
    profile.save(update_fields=["latest_revision", "updated_at"])
    return AgentRevision.objects.create(
        profile=profile,
        number=profile.latest_revision,
        note=note,
        created_by=actor.audit_name,
        **definition,
    )


def agent_revision_get(*, tenant: Tenant, reference: str) -> AgentRevision:
    """The revision ``reference`` names among ``tenant``'s profiles: ``name`` (the latest) or
    ``name@n``. Raises :class:`AgentError` (``unknown_agent``)."""
    match = REFERENCE.fullmatch(reference) if isinstance(reference, str) else None
    profile = (
        AgentProfile.objects.filter(tenant=tenant, name=match["name"]).first() if match else None
    )
    number = int(match["number"]) if match and match["number"] else None
    revision = None
    if profile is not None:
        wanted = number or profile.latest_revision
        revision = profile.revisions.select_related("profile").filter(number=wanted).first()
    if revision is None:
        message = f"The tenant has no agent {reference!r} (name, or name@revision)."
        raise AgentError("unknown_agent", message, details={"fields": {"agent": [message]}})
    return revision
