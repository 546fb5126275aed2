"""Bench-only tools and worker-side turn timing, registered on import.

Imported through ``CALLGATE_TOOL_MODULES=toolcalls.demo.tools,bench.tools`` by the bench process
and by its workers. The tools answer at once, so every millisecond measured is Callgate's.

Task timing (``BENCH_TIMINGS_DIR``): a worker that imports this module times each task from
Celery's ``task_prerun`` to ``task_postrun`` with ``time.perf_counter`` and appends one line per
task, ``<task name> <ms>``, to ``tasks.<pid>.txt``. For ``toolcalls.run_turn`` that is exactly the
body, ``turns.turn_run``: claim → model request → record, with their commits and the wake-ups
sent after them, never the time the task waited in the queue.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from celery.signals import task_postrun, task_prerun

from toolcalls.registry import ToolContext, ToolSpec, register

TOOL = "bench_lookup"
_REVISIONS = {"input": "v1", "output": "v1", "effect": "v1", "handler": "v1"}


def bench_lookup(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    """Answer at once: a read with a result that differs per step (so every set makes progress),
    padded with ``result_bytes`` (bytes) of hex text that does not compress."""
    step = args["step"]
    result: dict[str, Any] = {"step": step, "value": f"{ctx.subject_ref}:{step}"}
    if args.get("result_bytes"):
        result["page"] = _incompressible(f"{ctx.operation_id}:{step}", args["result_bytes"])
    return result


def _incompressible(seed: str, size: int) -> str:
    """``size`` characters of chained SHA-256 hex digests of ``seed``: text as dense as a real
    page of data, so stored sizes are not flattered by compression."""
    blocks: list[str] = []
    block = seed.encode()
    while 64 * len(blocks) < size:
        block = hashlib.sha256(block).hexdigest().encode()
        blocks.append(block.decode())
    return "".join(blocks)[:size]


register(
    ToolSpec(
        name=TOOL,
        description="Look up one value (bench: answers at once).",
        parameters={
            "type": "object",
            "properties": {
                "step": {"type": "integer", "minimum": 0},
                "result_bytes": {"type": "integer", "minimum": 0, "maximum": 65536},
            },
            "required": ["step"],
            "additionalProperties": False,
        },
        schema_version="bench-lookup-v1",
        risk="read",
        timeout_ms=1000,
        handler=bench_lookup,
        revisions=_REVISIONS,
    )
)

_started: dict[str, float] = {}


def _timings_file() -> Path | None:
    folder = os.environ.get("BENCH_TIMINGS_DIR")
    return Path(folder) / f"tasks.{os.getpid()}.txt" if folder else None


@task_prerun.connect
def _task_started(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _started[task_id] = time.perf_counter()


@task_postrun.connect
def _task_finished(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    started = _started.pop(task_id or "", None)
    path = _timings_file()
    if started is None or path is None or task is None:
        return
    elapsed_ms = (time.perf_counter() - started) * 1000
    with path.open("a") as out:
        out.write(f"{task.name} {elapsed_ms:.3f}\n")
