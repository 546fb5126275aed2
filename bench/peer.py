"""The reference durable runtime, measured beside Callgate on the same machine.

The reference is an in-process durable agent loop checkpointing to its own PostgreSQL, running
the same refund scenario with a scripted zero-latency model (four model turns, one approval
pause). Its script lives outside this repository: ``CALLGATE_BENCH_PEER`` names it, by default
``shared/bench/peer.sh`` beside the checkout. It prints one line,
``ops=<n> wall_s=<s> ms_per_op=<ms> ms_per_turn=<ms>``. Without the script every peer figure is
``None`` and the table says why.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from bench.env import REPO

_FIGURE = re.compile(r"(ms_per_op|ms_per_turn)=([0-9.]+)")


def peer_script() -> Path | None:
    """The reference runtime's script, or ``None`` when it is not there."""
    configured = os.environ.get("CALLGATE_BENCH_PEER")
    path = Path(configured) if configured else REPO.parent / "shared" / "bench" / "peer.sh"
    return path if path.is_file() else None


def peer_run(operations: int) -> dict[str, float] | None:
    """Run the reference ``operations`` times; returns ``{"ms_per_op", "ms_per_turn"}`` (ms),
    or ``None`` without a script. Raises ``RuntimeError`` when the script fails or prints no
    figures (its output is in the message)."""
    script = peer_script()
    if script is None:
        return None
    done = subprocess.run(
        ["bash", str(script), str(operations)], capture_output=True, text=True, check=False
    )
    figures = {name: float(value) for name, value in _FIGURE.findall(done.stdout)}
    if done.returncode != 0 or len(figures) != 2:
        raise RuntimeError(f"{script} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return figures
