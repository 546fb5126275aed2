"""The bench's figures: percentiles, targets, the printed table and the JSON file."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Every key the JSON file holds, in table order.
KEYS = (
    "turn_ms_p50",
    "turn_ms_p99",
    "baseline_turn_ms_p50",
    "baseline_cycle_ms_p50",
    "queries_per_turn",
    "queries_per_cycle",
    "refund_op_ms_p50",
    "refund_parked_ms_p50",
    "refund_decide_ms_p50",
    "refund_finish_ms_p50",
    "refund_bare_op_ms_p50",
    "baseline_refund_ms_p50",
    "refund_statements",
    "resume_ms_p50",
    "resume_ms_p99",
    "turns_per_s_1w",
    "turns_per_s_2w",
    "op_span_share_p99_2w",
    "queue_ms_p99_1k",
    "queue_ms_p99_100k",
    "queue_console_ms_p99_1k",
    "queue_api_ms_p99_1k",
    "queue_console_ms_p99_100k",
    "queue_api_ms_p99_100k",
    "lists_console_ms_p99_1k",
    "lists_console_ms_p99_100k",
    "worker_rss_mb",
    "peer_turn_ms",
    "peer_op_ms",
    "baseline_turn_ratio",
    "turn_ratio",
    "refund_op_ratio",
    "refund_bare_op_ratio",
    "bytes_per_op_4",
    "bytes_per_op_16",
    "bytes_per_op_64",
    "storage_growth",
)
#: Ratios to the reference runtime: figure → (Callgate's figure, the reference's figure).
RATIOS = {
    "baseline_turn_ratio": ("baseline_turn_ms_p50", "peer_turn_ms"),
    "turn_ratio": ("turn_ms_p50", "peer_turn_ms"),
    "refund_op_ratio": ("refund_op_ms_p50", "peer_op_ms"),
    "refund_bare_op_ratio": ("refund_bare_op_ms_p50", "peer_op_ms"),
    # Bytes at 64 turns over bytes at 16: 4.0 when storage grows linearly with the turns.
    "storage_growth": ("bytes_per_op_64", "bytes_per_op_16"),
}

Figures = Mapping[str, float | None]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0 to 100) with linear interpolation; ``None`` without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Target:
    """A figure's target: ``text`` for the table, ``met`` decides from all figures."""

    text: str
    met: Callable[[Figures], bool | None]


Bound = Callable[[Figures], float | None]


def _at_most(key: str, limit: Bound) -> Callable[[Figures], bool | None]:
    def met(figures: Figures) -> bool | None:
        value, bound = figures.get(key), limit(figures)
        return None if value is None or bound is None else value <= bound

    return met


def _at_least(key: str, limit: float) -> Callable[[Figures], bool | None]:
    def met(figures: Figures) -> bool | None:
        value = figures.get(key)
        return None if value is None else value >= limit

    return met


def with_ratios(figures: Figures) -> dict[str, float | None]:
    """``figures`` plus each of :data:`RATIOS` (``None`` when either side is missing)."""
    derived: dict[str, float | None] = dict(figures)
    for key, (ours, reference) in RATIOS.items():
        top, bottom = figures.get(ours), figures.get(reference)
        derived[key] = None if top is None or not bottom else top / bottom
    return derived


def _scaled(key: str, factor: float) -> Bound:
    def bound(figures: Figures) -> float | None:
        value = figures.get(key)
        return None if value is None else value * factor

    return bound


#: The product's targets. On a small, noisy machine the ratios matter more than the absolute
#: figures: a turn through Celery no slower than the in-process durable loop, Callgate's turn
#: no slower than the reference runtime's, a queue page at 100k pending no more than 1.5 times
#: its cost at 1k, storage linear in the turns.
TARGETS: dict[str, Target] = {
    "turn_ms_p50": Target(
        "<= baseline_turn_ms_p50", _at_most("turn_ms_p50", _scaled("baseline_turn_ms_p50", 1.0))
    ),
    "queries_per_turn": Target("<= 6", _at_most("queries_per_turn", lambda _f: 6.0)),
    "turns_per_s_2w": Target(">= 200", _at_least("turns_per_s_2w", 200.0)),
    "op_span_share_p99_2w": Target("<= 0.5", _at_most("op_span_share_p99_2w", lambda _f: 0.5)),
    "baseline_turn_ratio": Target("<= 1.0", _at_most("baseline_turn_ratio", lambda _f: 1.0)),
    "turn_ratio": Target("<= 1.2", _at_most("turn_ratio", lambda _f: 1.2)),
    "refund_op_ratio": Target("<= 2.0", _at_most("refund_op_ratio", lambda _f: 2.0)),
    "storage_growth": Target("<= 4.4 (linear: 4.0)", _at_most("storage_growth", lambda _f: 4.4)),
    "queue_ms_p99_100k": Target(
        "<= 1.5 x queue_ms_p99_1k",
        _at_most("queue_ms_p99_100k", _scaled("queue_ms_p99_1k", 1.5)),
    ),
    "lists_console_ms_p99_100k": Target(
        "<= 100", _at_most("lists_console_ms_p99_100k", lambda _f: 100.0)
    ),
    "worker_rss_mb": Target("<= 150", _at_most("worker_rss_mb", lambda _f: 150.0)),
}


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if abs(value) < 1000 else f"{value:,.0f}"


def table(figures: Figures, notes: Mapping[str, str] | None = None) -> str:
    """The figures as a text table: value, target, whether it is met, and a note."""
    notes = notes or {}
    rows = [("figure", "value", "target", "met", "note")]
    for key in KEYS:
        target = TARGETS.get(key)
        met = target.met(figures) if target else None
        verdict = "" if target is None else {True: "yes", False: "NO", None: "n/a"}[met]
        text = target.text if target else ""
        rows.append((key, _number(figures.get(key)), text, verdict, notes.get(key, "")))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = []
    for number, row in enumerate(rows):
        cells = [row[0].ljust(widths[0]), row[1].rjust(widths[1])]
        cells += [row[2].ljust(widths[2]), row[3].ljust(widths[3]), row[4]]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def json_write(path: Path, figures: Figures) -> dict[str, float | None]:
    """Write exactly :data:`KEYS` (``null`` for a figure not measured) to ``path``; returns
    what was written. Values are rounded to 0.01."""
    data = {
        key: None if figures.get(key) is None else round(float(figures[key] or 0), 2)
        for key in KEYS
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    return data
