"""``make bench``: Callgate's control plane measured on PostgreSQL, Redis and real workers.

The model is scripted and answers at once (replay transport), the tools answer at once
(``bench.tools``), so what is measured is Callgate: claiming, recording, dispatching, waking
workers, resuming, and reading the approval queue. Prints progress lines, then a table of every
figure next to its target; ``BENCH_JSON=path`` also writes the figures as JSON
(:data:`bench.report.KEYS`), and ``BENCH_QUICK=1`` runs smaller sizes (under three minutes).

The reference runtime (:mod:`bench.peer`) runs before and after Callgate's phases, and the
table gives each ratio to it beside its target. Phases, in order, on a freshly created database
(``bench.env``):

1. in-process baseline (``turns.turn_run`` called directly), statements per turn and per refund,
   and the refund in this process as a worker continues it;
2. one worker: turn latency, operations one at a time; the refund scenario with its approval
   decided as soon as it parks, and the resume latency;
3. one fresh worker: throughput over many concurrent operations, then its RSS;
4. two workers: throughput over many concurrent operations;
5. storage: the bytes an operation of 4, 16 and 64 turns stores (``phases.storage``);
6. the approval queue (console view and API), the console's decisions history and operations
   list, at the smaller and the larger pending count, with decided approvals from
   ``manage.py seed_approvals``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.env import DATABASE_URL, VAR, database_recreate, django_setup


def _size(count: int) -> str:
    return f"{count // 1_000_000}M" if count >= 1_000_000 else f"{count // 1000}k"


def _peer(operations: int, notes: dict[str, str], when: str) -> dict[str, float] | None:
    """The reference runtime's figures for ``operations`` refunds (``None`` without its
    script, with a note saying so)."""
    from bench import peer, phases

    if peer.peer_script() is None:
        notes["peer_turn_ms"] = "skipped: no reference script (CALLGATE_BENCH_PEER)"
        return None
    phases.say(f"reference runtime, {when}: {operations} refunds")
    figures = peer.peer_run(operations)
    phases.say(f"reference runtime, {when}: {figures}")
    return figures


def _peer_figures(
    before: dict[str, float] | None, after: dict[str, float] | None
) -> dict[str, float | None]:
    """The mean of the reference's runs before and after Callgate's phases, per turn and per
    operation (ms)."""
    runs = [run for run in (before, after) if run is not None]
    if not runs:
        return {"peer_turn_ms": None, "peer_op_ms": None}
    return {
        "peer_turn_ms": sum(run["ms_per_turn"] for run in runs) / len(runs),
        "peer_op_ms": sum(run["ms_per_op"] for run in runs) / len(runs),
    }


def main() -> int:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    VAR.mkdir(parents=True, exist_ok=True)
    database_recreate()
    django_setup()
    from bench import phases, report, workers

    sizes = phases.QUICK if quick else phases.FULL
    phases.say(f"bench ({'quick' if quick else 'full'}) on {DATABASE_URL.rsplit('@', 1)[-1]}")
    world = phases.world_create()
    figures: dict[str, float | None] = {}
    notes: dict[str, str] = {}

    peer_operations = 100 if quick else 300
    before = _peer(peer_operations, notes, "before")

    phases.say("phase 1/6: in-process baseline")
    figures.update(phases.baseline(world, sizes))
    notes["baseline_turn_ms_p50"] = "each model turn, in this process"
    notes["baseline_cycle_ms_p50"] = "an operation start to end / its turns (calls included)"
    notes["queries_per_turn"] = "mean; BEGIN/COMMIT not counted"
    notes["queries_per_cycle"] = "an operation's statements / its turns (calls included)"
    figures.update(phases.refund_statements(world))
    notes["refund_statements"] = "one refund, start to COMPLETED; handlers' own not counted"
    figures.update(phases.refund_in_process(world, sizes))
    notes["baseline_refund_ms_p50"] = "a refund in this process, as a worker continues it"

    phases.say("phase 2/6: one worker, one operation at a time")
    with workers.Workers(1) as one:
        one.wait_ready()
        figures.update(phases.turn_latency(world, sizes))
        figures.update(phases.refund(world, sizes))
        figures.update(phases.refund_bare(world, sizes))
    notes["turn_ms_p50"] = "inside the worker: (claim +) request + record"
    notes["refund_op_ms_p50"] = f"{sizes.refund_operations} refunds, start to COMPLETED"
    notes["refund_parked_ms_p50"] = "start -> WAITING_APPROVAL seen here"
    notes["refund_decide_ms_p50"] = "approval_decide in this process"
    notes["refund_finish_ms_p50"] = "decided -> COMPLETED seen here"
    notes["resume_ms_p50"] = "decision event -> APPROVED->EXECUTING event"
    notes["refund_bare_op_ms_p50"] = "the same, the reference's tools: at once, no shop"

    phases.say("phase 3/6: throughput, one worker")
    pks = phases.throughput_prepare(world, sizes, sizes.throughput_operations_1w)
    with workers.Workers(1) as one:
        result = phases.throughput_wait(pks, "1 worker")
        figures["turns_per_s_1w"] = result["turns_per_s"]
        figures["worker_rss_mb"] = one.started[0].rss_mb()
    notes["turns_per_s_1w"] = f"{result['turns']:,.0f} turns, {len(pks)} concurrent operations"
    notes["worker_rss_mb"] = f"pool process after {result['turns']:,.0f} turns"

    phases.say("phase 4/6: throughput, two workers")
    pks = phases.throughput_prepare(world, sizes, sizes.throughput_operations_2w)
    with workers.Workers(2):
        result = phases.throughput_wait(pks, "2 workers")
        figures["turns_per_s_2w"] = result["turns_per_s"]
        figures["op_span_share_p99_2w"] = result["span_share_p99"]
    notes["turns_per_s_2w"] = f"{result['turns']:,.0f} turns, {len(pks)} concurrent operations"
    notes["op_span_share_p99_2w"] = "an operation's own first claim to completion, over the run"

    phases.say("phase 5/6: storage per operation")
    figures.update(phases.storage(world))
    notes["storage_growth"] = "bytes_per_op_64 / bytes_per_op_16"
    after = _peer(peer_operations, notes, "after")
    figures.update(_peer_figures(before, after))

    phases.say("phase 6/6: the approval queue")
    # The history first, as in a real queue: decided approvals are older than pending ones.
    phases.queue_seed(world, pending=0, decided=sizes.queue_decided)
    seeded = 0
    for label, count in zip(("1k", "100k"), sizes.queue_pending, strict=True):
        phases.queue_seed(world, pending=count - seeded, decided=0)
        seeded = count
        measured = phases.queue_measure(world, sizes.queue_samples)
        figures[f"queue_console_ms_p99_{label}"] = measured["console"]
        figures[f"queue_api_ms_p99_{label}"] = measured["api"]
        figures[f"lists_console_ms_p99_{label}"] = measured["lists"]
        notes[f"lists_console_ms_p99_{label}"] = "decisions history and operations list pages"
        queue = [measured["console"], measured["api"]]
        figures[f"queue_ms_p99_{label}"] = max(v for v in queue if v is not None)
        notes[f"queue_ms_p99_{label}"] = (
            f"worse of console and API; {_size(count)} pending, "
            f"{_size(sizes.queue_decided)} decided"
        )
        phases.say(
            f"queue at {count:,} pending: console p99 {measured['console']:.1f} ms, "
            f"API p99 {measured['api']:.1f} ms, lists p99 {measured['lists']:.1f} ms"
        )

    print()
    measured = report.with_ratios(figures)
    print(report.table(measured, notes))
    target = os.environ.get("BENCH_JSON")
    if target:
        report.json_write(Path(target), measured)
        phases.say(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
