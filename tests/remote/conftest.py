"""Remote tool servers as real processes on 127.0.0.1, and a scriptable HTTP tool in a thread."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from django.db import connection

from tests.conftest import REPO, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class ServerProcess:
    """A tool server process: ``argv`` (``{port}`` filled in), started on a free port, on the
    test database; ``env`` adds to its environment (fault points)."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    database: dict[str, Any] | None = None

    def start(self) -> ServerProcess:
        db = self.database or connection.settings_dict
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "TEST_DATABASE_URL": (
                f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
            ),
            **self.env,
        }
        argv = [part.replace("{port}", str(self.port)) for part in self.argv]
        self.process = subprocess.Popen(argv, cwd=REPO, env=env)
        wait_for(lambda: _listening(self.port), timeout_s=30, what=f"{argv} to listen")
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def manage(*args: str) -> list[str]:
    return [sys.executable, "manage.py", *args]


@pytest.fixture(scope="session")
def test_database(django_db_setup, django_db_blocker) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """The test database's connection settings (for processes started by the tests)."""
    with django_db_blocker.unblock():
        return dict(connection.settings_dict)


@pytest.fixture(scope="session")
def _demo_mcp_process(test_database: dict[str, Any]) -> Iterator[ServerProcess]:
    server = ServerProcess(manage("demo_mcp_server", "--port", "{port}"), database=test_database)
    yield server.start()
    server.stop()


@pytest.fixture(scope="session")
def _demo_http_process(test_database: dict[str, Any]) -> Iterator[ServerProcess]:
    server = ServerProcess(manage("demo_http_tools", "--port", "{port}"), database=test_database)
    yield server.start()
    server.stop()


@pytest.fixture
def demo_mcp_server(_demo_mcp_process: ServerProcess, transactional_db) -> ServerProcess:  # type: ignore[no-untyped-def]
    """``manage.py demo_mcp_server`` on a free port (one for the session)."""
    return _demo_mcp_process


@pytest.fixture
def demo_http_tools(_demo_http_process: ServerProcess, transactional_db) -> ServerProcess:  # type: ignore[no-untyped-def]
    """``manage.py demo_http_tools`` on a free port (one for the session)."""
    return _demo_http_process


def mcp_url(server: ServerProcess) -> str:
    return f"http://127.0.0.1:{server.port}/mcp"


def http_url(server: ServerProcess) -> str:
    return f"http://127.0.0.1:{server.port}"


@dataclass
class ScriptedMcp:
    """The fixture MCP server (``mcp_fixture_server.py``) and its script file."""

    process: ServerProcess
    path: Path

    @property
    def url(self) -> str:
        return mcp_url(self.process)

    def script(self, tools: list[dict[str, Any]], calls: dict[str, Any] | None = None) -> None:
        self.path.write_text(json.dumps({"tools": tools, "calls": calls or {}}))


@pytest.fixture
def scripted_mcp(tmp_path: Path, test_database: dict[str, Any]) -> Iterator[ScriptedMcp]:
    path = tmp_path / "mcp-script.json"
    path.write_text(json.dumps({"tools": [], "calls": {}}))
    script = str(Path(__file__).with_name("mcp_fixture_server.py"))
    process = ServerProcess([sys.executable, script, "{port}", str(path)], database=test_database)
    process.start()
    yield ScriptedMcp(process, path)
    process.stop()


Reply = Callable[[BaseHTTPRequestHandler, bytes], None]


@dataclass
class ScriptedHttp:
    """An HTTP tool in a thread of the test: ``reply(handler, body)`` answers each request;
    ``requests`` records (method, path, headers, body)."""

    reply: Reply
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def send(
    handler: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    content_type: str = "application/json",
) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def dripping(answer: bytes, *, every_s: float) -> Reply:
    """A reply that writes ``answer`` as it is (status line, headers, body) a byte every
    ``every_s`` seconds, until all is written or the client hangs up."""

    def reply(handler: BaseHTTPRequestHandler, _body: bytes) -> None:
        handler.close_connection = True
        with contextlib.suppress(OSError):  # the client gave up and closed the connection
            for byte in answer:
                handler.wfile.write(bytes([byte]))
                time.sleep(every_s)

    return reply


#: Headers of an MCP session passed both ways by :func:`forward`.
_SESSION = ("Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version")


def forward(upstream: str, handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """Send the POST ``handler`` holds to the MCP server at ``upstream`` with the session's
    headers, and its answer back; any other method is answered 405 (no listening stream)."""
    if handler.command != "POST":
        send(handler, 405, b"", content_type="text/plain")
        return
    forwarded = sent_on(upstream, handler, body)
    handler.send_response(forwarded.status_code)
    for name in _SESSION:
        if name in forwarded.headers:
            handler.send_header(name, forwarded.headers[name])
    handler.send_header("Content-Length", str(len(forwarded.content)))
    handler.end_headers()
    handler.wfile.write(forwarded.content)


def sent_on(upstream: str, handler: BaseHTTPRequestHandler, body: bytes) -> requests.Response:
    """The MCP server at ``upstream``'s answer to the POST ``handler`` holds."""
    headers = {name: handler.headers[name] for name in _SESSION if handler.headers[name]}
    with requests.Session() as session:
        session.trust_env = False  # straight to the server, whatever proxy a test names
        return session.post(upstream, data=body, headers=headers, timeout=10)


def jsonrpc_method(command: str, body: bytes) -> str:
    """The JSON-RPC method of an HTTP request (``command``, ``body``) of an MCP session
    (``""``: none, or not a POST)."""
    message = json.loads(body) if command == "POST" else {}
    return str(message.get("method", "")) if isinstance(message, dict) else ""


def holding(upstream: str, method: str, *, seconds: float) -> Reply:
    """An MCP session forwarded to ``upstream``, but for its requests of JSON-RPC ``method``:
    each is held ``seconds`` and never answered (nor forwarded)."""

    def reply(handler: BaseHTTPRequestHandler, body: bytes) -> None:
        if jsonrpc_method(handler.command, body) != method:
            forward(upstream, handler, body)
            return
        handler.close_connection = True
        time.sleep(seconds)

    return reply


#: The start of a TLS handshake record (a 64-byte ServerHello): 20 s at a byte every 0.3 s.
HANDSHAKE = b"\x16\x03\x03\x00\x40" + bytes(64)


@pytest.fixture
def tls_dripping() -> Iterator[tuple[str, list[bytes]]]:
    """An https URL on 127.0.0.1 whose server reads the client's first flight (its TLS hello,
    recorded in the list) and answers with :data:`HANDSHAKE`, a byte every 0.3 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        with contextlib.suppress(OSError):  # the client gave up, or the test ended
            connection, _ = listener.accept()
            with connection:
                received.append(connection.recv(65536))
                for byte in HANDSHAKE:
                    connection.sendall(bytes([byte]))
                    time.sleep(0.3)

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}", received
    listener.close()


@pytest.fixture
def scripted_http() -> Iterator[ScriptedHttp]:
    tool = ScriptedHttp(reply=lambda handler, body: send(handler, 200, b"{}"))

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            tool.requests.append((self.command, self.path, dict(self.headers), body))
            tool.reply(self, body)

        do_GET = do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    tool.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield tool
    httpd.shutdown()
    httpd.server_close()
