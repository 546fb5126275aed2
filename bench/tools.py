"""Bench-only tools and worker-side turn timing, registered on import.

Imported through ``CALLGATE_TOOL_MODULES=toolcalls.demo.tools,bench.tools`` by the bench process
and by its workers. The tools answer at once, so every millisecond measured is Callgate's.

Step timing (``BENCH_TIMINGS_DIR``): a worker that imports this module times each engine step
its tasks run (``turns.turn_run``, ``execution.call_execute``, ``approvals.call_resume``) with
``time.perf_counter`` and appends one line per step, ``<task name> <ms>``, to
``tasks.<pid>.txt``. For ``toolcalls.run_turn`` that is claim → model request → record, with
their commits and the wake-ups sent after them, whether the worker took the step from the queue
or continued with it, and never the time it waited in the queue.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toolcalls.registry import ToolContext, ToolSpec, register
from toolcalls.services import approvals, execution, turns

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


def _timings_file() -> Path | None:
    folder = os.environ.get("BENCH_TIMINGS_DIR")
    return Path(folder) / f"tasks.{os.getpid()}.txt" if folder else None


def _timed(name: str, step: Callable[..., None]) -> Callable[..., None]:
    """``step`` (an engine service a task runs), appending ``<name> <ms>`` per run to the
    timings file when there is one."""

    @functools.wraps(step)
    def timed(**kwargs: Any) -> None:
        started = time.perf_counter()
        try:
            step(**kwargs)
        finally:
            path = _timings_file()
            if path is not None:
                with path.open("a") as out:
                    out.write(f"{name} {(time.perf_counter() - started) * 1000:.3f}\n")

    return timed


# Each step is timed where the task runs it, so a step a worker continues with (rather than
# one it took from the queue) is timed alike, and the queue wait never is.
turns.turn_run = _timed("toolcalls.run_turn", turns.turn_run)
execution.call_execute = _timed("toolcalls.execute_call", execution.call_execute)
approvals.call_resume = _timed("toolcalls.resume_call", approvals.call_resume)
