"""Differences between two argument objects, for people (console) and the audit trail."""

from __future__ import annotations

from typing import Any

from deepdiff import DeepDiff
from deepdiff.helper import notpresent


def arguments_diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """One row per difference: ``path`` (``amount_cents``, ``items/0/sku``), ``change`` (DeepDiff's
    kind, e.g. ``values_changed``, ``dictionary_item_added``), ``old`` and ``new`` (``None`` when
    absent on that side). Empty when equal."""
    rows = []
    for change, levels in DeepDiff(old, new, view="tree").items():
        for level in levels:
            rows.append(
                {
                    "path": "/".join(str(step) for step in level.path(output_format="list")),
                    "change": change,
                    "old": None if level.t1 is notpresent else level.t1,
                    "new": None if level.t2 is notpresent else level.t2,
                }
            )
    return sorted(rows, key=lambda row: row["path"])
