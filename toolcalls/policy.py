"""Approval policies: whether a call must wait for a human before it runs (DESIGN.md §5, §9).

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
