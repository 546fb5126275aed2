"""Bench-only tools and worker-side turn timing, registered on import.

Imported through ``CALLGATE_TOOL_MODULES=toolcalls.demo.tools,bench.tools`` by the bench process
and by its workers. The tools answer at once, so every millisecond measured is Callgate's.

Step timing (``BENCH_TIMINGS_DIR``): a worker that imports this module times each engine step
its tasks run with ``time.perf_counter`` and appends one line per step, ``<task name> <ms>``, to
``tasks.<pid>.txt``: a model turn (``turns.turn_run``, or ``turns.turn_continue`` for a turn an
earlier step claimed) as ``toolcalls.run_turn``, a call (``execution.call_execute``, or
``execution.call_run`` for a claimed one) as ``toolcalls.execute_call``, a resume
(``approvals.call_resume``) as ``toolcalls.resume_call``. For a turn that is its claim (unless an
earlier step claimed it), the model request and the record (with whatever the record claims for
the worker's next step), with their commits and the wake-ups sent after them, whether the
worker took the step from the queue or continued with it, and never the time it waited in the
queue.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toolcalls.policy import always
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


#: The refund scenario's tools as the reference runtime has them, by the demo tool each stands
#: in for (the ``refund_bare_…`` figures): each answers ``{"ok": true}`` at once, no shop behind
#: it (no order, draft or ledger rows), no authorization, precondition or summary reads. What
#: the engine guarantees stays: a write is claimed under its idempotency key before it runs,
#: every submit waits for a person, and the approval is checked again at resume.
BARE_TOOLS = {
    "get_order": "bench_get_order",
    "create_refund_draft": "bench_create_refund_draft",
    "submit_refund": "bench_submit_refund",
}


def _ok(ctx: ToolContext, args: Mapping[str, Any]) -> dict[str, Any]:
    return {"ok": True}


def _bare(name: str, properties: Mapping[str, str], **spec: Any) -> None:
    """Register bare tool ``name`` taking ``properties`` (argument → JSON type), all required."""
    register(
        ToolSpec(
            name=name,
            description=f"{name} (bench: answers at once, no shop behind it).",
            parameters={
                "type": "object",
                "properties": {key: {"type": kind} for key, kind in properties.items()},
                "required": list(properties),
                "additionalProperties": False,
            },
            schema_version=f"{name}-v1",
            timeout_ms=1000,
            handler=_ok,
            revisions=_REVISIONS,
            **spec,
        )
    )


def _key(ctx: ToolContext, args: Mapping[str, Any]) -> str:
    return f"{ctx.operation_id}:{args['order_id']}"


_bare(BARE_TOOLS["get_order"], {"order_id": "string"}, risk="read")
_bare(
    BARE_TOOLS["create_refund_draft"],
    {"order_id": "string", "amount_cents": "integer", "reason": "string"},
    risk="write",
    idempotency_key=_key,
)
_bare(
    BARE_TOOLS["submit_refund"],
    {"order_id": "string", "draft_id": "string", "amount_cents": "integer"},
    risk="irreversible",
    idempotency_key=_key,
    approval=always("bench: every submit waits for a person"),
)


def _timings_file() -> Path | None:
    folder = os.environ.get("BENCH_TIMINGS_DIR")
    return Path(folder) / f"tasks.{os.getpid()}.txt" if folder else None


_timing = threading.local()


def _timed(name: str, step: Callable[..., None]) -> Callable[..., None]:
    """``step`` (an engine service a task runs), appending ``<name> <ms>`` per run to the
    timings file when there is one; a step run inside another of the same name (``turn_run``
    runs ``turn_continue``) is part of it."""

    @functools.wraps(step)
    def timed(*args: Any, **kwargs: Any) -> None:
        if getattr(_timing, name, False):
            step(*args, **kwargs)
            return
        setattr(_timing, name, True)
        started = time.perf_counter()
        try:
            step(*args, **kwargs)
        finally:
            setattr(_timing, name, False)
            path = _timings_file()
            if path is not None:
                with path.open("a") as out:
                    out.write(f"{name} {(time.perf_counter() - started) * 1000:.3f}\n")

    return timed


# Each step is timed where the task runs it, so a step a worker continues with (rather than
# one it took from the queue) is timed alike, and the queue wait never is. The claimed steps
# are looked up on their module when a step claims them, so they are timed too.
turns.turn_run = _timed("toolcalls.run_turn", turns.turn_run)
turns.turn_continue = _timed("toolcalls.run_turn", turns.turn_continue)
execution.call_execute = _timed("toolcalls.execute_call", execution.call_execute)
execution.call_run = _timed("toolcalls.execute_call", execution.call_run)
approvals.call_resume = _timed("toolcalls.resume_call", approvals.call_resume)
