"""Approval policies: whether a call must wait for a human before it runs (docs/design.md §5, §9).

A policy is data plus one predicate; its ``revision`` is bound into every approval and result so
a policy change between request and resume is detected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Returns the reason approval is needed, or ``None`` when the call may run unattended.
Rule = Callable[[Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class Threshold:
    """A threshold policy's terms: approval when ``arguments[field]`` (an integer in ``unit``)
    exceeds ``limit()``, read at decision time."""

    field: str
    unit: str
    limit: Callable[[], int]


@dataclass(frozen=True)
class ApprovalPolicy:
    """``rule(arguments)`` → reason string when approval is needed, else ``None``.
    ``threshold``: the terms of a threshold policy (:func:`above_threshold`), else ``None``."""

    revision: str
    rule: Rule
    description: str
    threshold: Threshold | None = None

    def reason_for(self, arguments: Mapping[str, Any]) -> str | None:
        """The reason this call needs approval, or ``None``."""
        return self.rule(arguments)


def never(revision: str = "never-v1") -> ApprovalPolicy:
    """No approval, ever (read tools, cheap drafts)."""
    return ApprovalPolicy(revision=revision, rule=lambda _args: None, description="never")


def always(reason: str, revision: str = "always-v1") -> ApprovalPolicy:
    """Every call waits for a human."""
    return ApprovalPolicy(revision=revision, rule=lambda _args: reason, description="always")


def above_threshold(
    *, field: str, threshold: Callable[[], int], unit: str, revision: str
) -> ApprovalPolicy:
    """Approval when ``arguments[field]`` exceeds ``threshold()``.

    ``threshold`` is called at decision time so a settings change applies without a restart; the
    ``revision`` string must change with the rule's meaning.
    """

    def rule(arguments: Mapping[str, Any]) -> str | None:
        value = arguments.get(field)
        limit = threshold()
        if isinstance(value, int) and value > limit:
            return f"{field} {value} {unit} is above the approval threshold of {limit} {unit}"
        return None

    return ApprovalPolicy(
        revision=revision,
        rule=rule,
        description=f"approval when {field} > threshold ({unit})",
        threshold=Threshold(field=field, unit=unit, limit=threshold),
    )


#: The approval policies an agent revision may add to a tool's own (``AgentRevision``'s
#: ``approval_overrides``): every call, or calls whose amount is above a threshold.
OVERRIDE_POLICIES = ("always", "above_threshold")


def override_problem(override: Any, *, amount_field: str | None) -> str | None:
    """Why ``override`` is not an approval override for a tool whose money amount argument is
    ``amount_field`` (``None``: it has none), or ``None``. The shapes: ``{"policy": "always"}``
    and ``{"policy": "above_threshold", "threshold": n}`` (``n``: a whole amount ≥ 0 in the
    tool's amount unit, cents)."""
    if not isinstance(override, Mapping) or override.get("policy") not in OVERRIDE_POLICIES:
        return f'an override is {{"policy": one of {", ".join(OVERRIDE_POLICIES)}}}'
    if override["policy"] == "always":
        return None if set(override) == {"policy"} else '"always" takes no other key'
    threshold = override.get("threshold")
    if set(override) != {"policy", "threshold"} or isinstance(threshold, bool):
        return 'an "above_threshold" override takes exactly "policy" and "threshold"'
    if not isinstance(threshold, int) or threshold < 0:
        return "threshold must be a whole amount of 0 or more (cents)"
    if amount_field is None:
        return "this tool has no amount to compare with a threshold"
    return None


def stricter(
    base: ApprovalPolicy, override: Mapping[str, Any], *, amount_field: str | None, revision: str
) -> ApprovalPolicy:
    """``base`` with ``override`` (valid for :func:`override_problem`) added: a call needs
    approval when either asks for it, so the result is never looser than ``base``. ``revision``
    names both (it is bound into approvals and results). A threshold override on a tool with no
    ``amount_field`` (a remote tool's review changed since the override was checked) asks for
    approval of every call."""
    if override["policy"] == "always" or amount_field is None:
        # A threshold on a tool that no longer has an amount (a remote tool reviewed again
        # without one) fails closed: every call waits for a person.
        extra = always("the agent profile asks approval for every call of this tool")
    else:
        limit = int(override["threshold"])
        extra = above_threshold(
            field=amount_field, threshold=lambda: limit, unit="cents", revision=revision
        )

    def rule(arguments: Mapping[str, Any]) -> str | None:
        return base.reason_for(arguments) or extra.reason_for(arguments)

    description = f"{base.description}; agent profile: {extra.description}"
    return ApprovalPolicy(revision=revision, rule=rule, description=description)
