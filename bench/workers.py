"""Real worker processes for the bench: ``celery -A config worker``, prefork, one pool process
each, as the README's production command starts them (with the bench's environment)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.env import REPO, VAR, environment

TIMINGS = VAR / "timings"


@dataclass
class Worker:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def pool_pids(self) -> list[int]:
        """The prefork pool processes (the children that run the tasks)."""
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def rss_mb(self) -> float:
        """Resident set size of the largest pool process, MiB (``VmRSS`` from /proc)."""
        return max((_rss_mb(pid) for pid in self.pool_pids()), default=0.0)


def _rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Workers:
    """Start ``count`` workers, wait until each answers a ping, stop them on exit."""

    count: int
    started: list[Worker] = field(default_factory=list)

    def __enter__(self) -> Workers:
        TIMINGS.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **environment(), "BENCH_TIMINGS_DIR": str(TIMINGS)}
        for number in range(1, self.count + 1):
            name = f"bench{number}"
            log = VAR / f"{name}.log"
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "celery", "-A", "config", "worker",
                    "--pool=prefork", "--concurrency=1", "--queues=callgate",
                    "--without-gossip", "--without-mingle", "--without-heartbeat",
                    "--loglevel=WARNING", f"--hostname={name}@%h",
                ],
                cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            self.started.append(Worker(name=name, process=process, log=log))
        return self

    def wait_ready(self, *, timeout_s: float = 60) -> None:
        """Block until every worker answers a remote-control ping (its consumer is running)."""
        from config.celery import app

        deadline = time.monotonic() + timeout_s
        expected = {worker.name for worker in self.started}
        while time.monotonic() < deadline:
            for worker in self.started:
                if worker.process.poll() is not None:
                    tail = worker.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"worker {worker.name} exited early:\n{tail}")
            replies = app.control.ping(timeout=0.5) or []
            answered = {name.split("@")[0] for reply in replies for name in reply}
            if expected <= answered:
                return
        raise RuntimeError(f"workers {sorted(expected)} did not answer within {timeout_s} s")

    def __exit__(self, *exc: object) -> None:
        for worker in self.started:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        for worker in self.started:
            try:
                worker.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()


def timing_marks() -> dict[Path, int]:
    """Current sizes of the workers' task-timing files (read them from here later)."""
    return {path: path.stat().st_size for path in TIMINGS.glob("tasks.*.txt")}


def timings_since(marks: dict[Path, int]) -> dict[str, list[float]]:
    """Task name → run times (ms) the workers wrote after ``marks`` were taken."""
    found: dict[str, list[float]] = {}
    for path in TIMINGS.glob("tasks.*.txt"):
        with path.open() as lines:
            lines.seek(marks.get(path, 0))
            for line in lines.read().splitlines():
                name, _, elapsed = line.partition(" ")
                found.setdefault(name, []).append(float(elapsed))
    return found


def timings_reset() -> None:
    TIMINGS.mkdir(parents=True, exist_ok=True)
    for path in TIMINGS.glob("tasks.*.txt"):
        path.unlink()
