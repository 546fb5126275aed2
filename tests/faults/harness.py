"""The processes of the fault suite and how a test drives them: a dedicated Redis, the fake
payments provider, Celery workers, polling, and the session's totals.

Nothing here touches the shared Redis (6379) or PostgreSQL's server process: the suite's Redis
is its own ``redis-server`` on its own port and its workers only know that one.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

import pytest
import redis

REPO = Path(__file__).resolve().parents[2]
#: Linux ``prctl(PR_SET_PDEATHSIG)``: the suite's processes die with the test process, however
#: it ends, so a killed pytest leaves no paused worker or Redis behind.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
_PR_SET_PDEATHSIG = 1
#: The suite's Redis port unless taken (then any free one): never the shared 6379.
DEFAULT_REDIS_PORT = int(os.environ.get("CALLGATE_FAULTS_REDIS_PORT", "6391"))


@dataclass
class Totals:
    """What the session did, printed at its end (``pytest_terminal_summary``)."""

    operations: int = 0
    faults: int = 0
    duplicates: int = 0
    lost: int = 0
    tests: int = 0


def poll(
    predicate: Callable[[], Any],
    *,
    timeout_s: float,
    what: str,
    tick: Callable[[], None] | None = None,
    interval_s: float = 0.05,
    diagnose: Callable[[], str] | None = None,
) -> Any:
    """Call ``tick`` (if any) then ``predicate`` until the latter returns something truthy;
    fail the test after ``timeout_s`` seconds, with ``diagnose()`` appended when given."""
    deadline = time.monotonic() + timeout_s
    while True:
        if tick is not None:
            tick()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{diagnose()}" if diagnose else ""
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}{extra}")
        time.sleep(interval_s)


def _die_with_parent() -> None:
    # Runs in the child between fork and exec; the library is loaded beforehand.
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port(preferred: int = 0) -> int:
    """``preferred`` when nothing listens on it, else a port the kernel says is free."""
    if preferred:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", preferred)) != 0:
                return preferred
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A throw-away ``redis-server`` without persistence: a restart is also a flush."""

    def __init__(self, folder: Path, totals: Totals, port: int = 0) -> None:
        self.folder = folder
        self.totals = totals
        self.port = free_port(port or DEFAULT_REDIS_PORT)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.folder),
                "--logfile", str(self.folder / "redis.log"),
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent,
        )  # fmt: skip
        poll(self._answers, timeout_s=10, what=f"redis-server on port {self.port}")

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            log = (self.folder / "redis.log").read_text(errors="replace")[-2000:]
            pytest.fail(f"redis-server exited ({self.process.returncode}):\n{log}")
        try:
            return bool(self.client().ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.kill()  # as a crashed broker: nothing is written anywhere
        self.process.wait(timeout=10)
        self.process = None

    def restart(self) -> None:
        """Kill and start again on the same port: every queued and unacked message is gone."""
        self.stop()
        self.start()
        self.totals.faults += 1

    def flush(self, *, fault: bool = True) -> None:
        """Drop every message (``FLUSHALL``); counted as a fault unless it is housekeeping."""
        self.client().flushall()
        if fault:
            self.totals.faults += 1


class Payments:
    """The fake payments provider, run as its own process (``payments_service.py``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        port_file = self.folder / "payments.port"
        port_file.unlink(missing_ok=True)
        with (self.folder / "payments.log").open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, str(Path(__file__).with_name("payments_service.py")),
                    "--db", str(self.folder / "payments.sqlite3"), "--port-file", str(port_file),
                ],
                stdout=subprocess.DEVNULL, stderr=log, preexec_fn=_die_with_parent,
            )  # fmt: skip
        poll(port_file.exists, timeout_s=10, what="the payments service to listen")
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)

    def _call(self, path: str, body: Mapping[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = Request(self.url + path, data=data, method="POST" if data else "GET")
        with urlopen(request, timeout=10) as response:
            return json.load(response)

    def reset(self) -> None:
        self._call("/_reset", {})

    def slow_down(self, delay_ms: int) -> None:
        """Answer each payment ``delay_ms`` after applying it (a slow provider)."""
        self._call("/_config", {"delay_ms": delay_ms})

    def ledger(self) -> dict[str, list[dict[str, Any]]]:
        """``{"requests": [...], "effects": [...]}`` as the provider recorded them."""
        return dict(self._call("/_ledger"))

    def effects(self, order_id: str | None = None) -> list[dict[str, Any]]:
        rows = self.ledger()["effects"]
        return [row for row in rows if order_id is None or row["order_id"] == order_id]

    def payment_requests(self, order_id: str | None = None) -> list[dict[str, Any]]:
        rows = [row for row in self.ledger()["requests"] if row["method"] == "POST"]
        return [
            row
            for row in rows
            if order_id is None or json.loads(row["body"])["order_id"] == order_id
        ]


@dataclass
class Worker:
    """One ``celery worker`` process and the configuration it was started with."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    faults: Mapping[str, str]
    env: Mapping[str, str]
    pool: str
    concurrency: int

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def ready(self) -> bool:
        if not self.alive():
            pytest.fail(f"worker {self.name} exited early:\n{self.log_tail()}")
        return b" ready." in self.log_path.read_bytes()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


@dataclass
class Workers:
    """Starts, kills and replaces the workers of one test; stops them all at its end.

    Each worker is ``celery -A config worker`` without gossip, mingle or heartbeat, on the
    suite's Redis and the test database, with ``base_env`` (short leases, fault directory, tool
    modules, payments URL) plus the per-worker fault points and overrides.
    """

    base_env: Mapping[str, str]
    folder: Path
    totals: Totals
    started: list[Worker] = field(default_factory=list)

    @property
    def fault_dir(self) -> Path:
        return Path(self.base_env["CALLGATE_FAULT_DIR"])

    def start(
        self,
        count: int = 1,
        *,
        faults: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        pool: str = "solo",
        concurrency: int = 1,
        wait: bool = True,
    ) -> list[Worker]:
        """Start ``count`` workers (``pool`` ``solo`` or ``prefork`` with ``concurrency``
        children); waits until each says it is ready unless ``wait`` is false."""
        workers = [self._spawn(faults or {}, env or {}, pool, concurrency) for _ in range(count)]
        if wait:
            self.wait_ready(workers)
        return workers

    def wait_ready(self, workers: list[Worker]) -> None:
        poll(
            lambda: all(worker.ready() for worker in workers),
            timeout_s=90,
            what="the workers to be ready",
            interval_s=0.1,
        )

    def _spawn(
        self, faults: Mapping[str, str], env: Mapping[str, str], pool: str, concurrency: int
    ) -> Worker:
        name = f"w{len(self.started) + 1}"
        log_path = self.folder / f"worker-{name}.log"
        full_env = {
            **os.environ,
            **self.base_env,
            "CALLGATE_FAULT_POINTS": json.dumps(dict(faults)),
            **env,
        }
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "celery", "-A", "config", "worker",
                    f"--hostname={name}.{os.getpid()}@faults", "--queues=callgate",
                    f"--pool={pool}", f"--concurrency={concurrency}", "--loglevel=INFO",
                    "--without-gossip", "--without-mingle", "--without-heartbeat",
                ],
                cwd=REPO, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )  # fmt: skip
        worker = Worker(name, process, log_path, dict(faults), dict(env), pool, concurrency)
        self.started.append(worker)
        return worker

    def by_pid(self, pid: int) -> Worker:
        for worker in self.started:
            if worker.pid == pid:
                return worker
        raise LookupError(f"no worker with pid {pid} (a prefork child?)")

    def signal(self, worker: Worker, sig: signal.Signals) -> None:
        """Send ``sig`` (SIGKILL: an OOM kill; SIGTERM: a warm shutdown) and count the fault."""
        worker.process.send_signal(sig)
        self.totals.faults += 1
        if sig == signal.SIGKILL:
            worker.process.wait(timeout=10)

    def alive(self) -> list[Worker]:
        return [worker for worker in self.started if worker.alive()]

    def replace_dead(self, wanted: int) -> None:
        """Start workers like the dead ones (same faults and settings) until ``wanted`` live:
        a supervisor restarting what keeps dying. Does not wait for them to be ready."""
        dead = [worker for worker in self.started if not worker.alive()]
        missing = wanted - len(self.alive())
        for template in dead[-missing:] if missing > 0 else []:
            self._spawn(template.faults, template.env, template.pool, template.concurrency)

    def markers(self, point: str) -> list[int]:
        """PIDs of the processes that reached fault point ``point`` (pause or crash)."""
        return sorted(int(p.name.split(".")[-2]) for p in self.fault_dir.glob(f"{point}.*.reached"))

    def wait_marker(self, point: str, *, timeout_s: float = 60) -> int:
        """Wait until a process reaches ``point``; returns its PID."""
        found = poll(
            lambda: self.markers(point),
            timeout_s=timeout_s,
            what=f"a worker to reach {point}",
            diagnose=self.logs,
        )
        return int(found[0])

    def release(self, point: str) -> None:
        """Let the processes holding at fault point ``point`` (``hold``) go on."""
        (self.fault_dir / f"{point}.release").touch()

    def crashes(self) -> int:
        """Processes that died at a ``crash`` fault point (each is an injected fault)."""
        points = {
            point
            for worker in self.started
            for point, action in worker.faults.items()
            if action.startswith("crash")
        }
        return sum(len(self.markers(point)) for point in points)

    def stop_all(self) -> None:
        """SIGKILL whatever still runs: the test is over and its state is checked as it is."""
        for worker in self.started:
            if worker.alive():
                worker.process.kill()
        for worker in self.started:
            worker.process.wait(timeout=20)

    def logs(self) -> str:
        return "\n".join(
            f"--- {worker.name} (pid {worker.pid}, rc {worker.process.poll()}) ---\n"
            f"{worker.log_tail(1500)}"
            for worker in self.started
        )
