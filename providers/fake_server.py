"""A local HTTP server that speaks each family's endpoint, for the live (SDK) transport: the
tests' stand-in provider, and ``manage.py fake_provider`` for working without a provider account.

Scripts are registered under a family and a model name; every request of that family for that
model is answered with the script's next reply (JSON, SSE or an HTTP error, exactly as written),
after the family's adapter checked the request against the provider's rules (``request_error``,
through the replay transport) — so a request the real provider would refuse gets that provider's
400 here too. A reply that branches on the results it is sent (``after_results``) answers with
its ``error`` variant when a result the request sends back is an error: the replay transport
answers, reading the results from the request as the family writes it
(:mod:`providers.sent_results`), exactly as for an operation run on replay. With ``rewind``, a
request that does not continue the conversation the script is in (or one past its last reply)
starts it again from its first reply: one operation at a time per script. Without it, such a
request is answered with the provider's 400.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from providers import sse
from providers.base import WireReply
from providers.errors import TransportError
from providers.families import get_adapter
from providers.replay import ReplayTransport

_ROUTES = {
    "/v1/responses": "openai_responses",
    "/v1/chat/completions": "openai_chat",
    "/v1/messages": "anthropic_messages",
    "/v1beta/interactions": "gemini_interactions",
}
_GEMINI = re.compile(
    r"^/v1beta/models/(?P<model>[^:/]+):(?P<verb>generateContent|streamGenerateContent)$"
)


@dataclass
class Script:
    replies: list[Mapping[str, Any]]
    position: int = 0


@dataclass
class Received:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any
    streamed: bool


@dataclass
class ReplayServer:
    host: str = "127.0.0.1"
    port_wanted: int = 0
    rewind: bool = False
    scripts: dict[tuple[str, str], Script] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    httpd: ThreadingHTTPServer | None = None

    def start(self) -> None:
        self.httpd = ThreadingHTTPServer((self.host, self.port_wanted), _handler(self))
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()

    @property
    def port(self) -> int:
        assert self.httpd is not None
        return self.httpd.server_address[1]

    def base_url(self, provider: str) -> str:
        """Base URL as each SDK expects it (OpenAI's includes ``/v1``)."""
        root = f"http://{self.host}:{self.port}"
        return f"{root}/v1" if provider == "openai" else root

    def script(self, *, model: str, family: str, replies: Sequence[Mapping[str, Any]]) -> None:
        with self.lock:
            self.scripts[family, model] = Script(replies=list(replies))

    def answer(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[WireReply, bool]:
        """The reply for one request and whether it is to be streamed."""
        route = urlsplit(path).path
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _error(400, "request body is not JSON"), False
        match = _GEMINI.match(route)
        family = "gemini_generate" if match else _ROUTES.get(route)
        model = match.group("model") if match else str(body.get("model", ""))
        streamed = (
            match.group("verb") == "streamGenerateContent" if match else body.get("stream") is True
        )
        with self.lock:
            self.received.append(Received(path, headers, body, streamed))
            script = self.scripts.get((family, model)) if family else None
            if family is None or script is None:
                return _error(404, f"no {family or route} script for model {model!r}"), False
            transport = ReplayTransport(adapter=get_adapter(family), replies=script.replies)
            turn = script.position
            if self.rewind and (
                turn >= len(script.replies) or transport.pairing_problem(body, turn) is not None
            ):
                turn = 0  # not the current conversation's next request: a new one
            script.position = turn + 1
        try:
            reply = transport.send(request=body, turn=turn, model=model)
        except TransportError as exc:
            return _error(400, str(exc)), False
        if reply.kind != "http_error" and (reply.kind == "stream") != streamed:
            wanted = "a stream" if streamed else "a JSON body"
            return _error(
                400, f"reply {turn} is {reply.kind!r} but the request asked for {wanted}"
            ), False
        return reply, streamed


def _error(status: int, message: str) -> WireReply:
    return WireReply(
        kind="http_error",
        http_status=status,
        body={"error": {"message": message, "type": "replay_server", "code": None}},
    )


def _handler(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            reply, _ = server.answer(self.path, headers, raw)
            if reply.kind == "stream":
                self._stream(reply)
            else:
                self._json(reply)

        def _json(self, reply: WireReply) -> None:
            payload = json.dumps(reply.body).encode()
            self.send_response(reply.http_status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, reply: WireReply) -> None:
            # No length: the body ends when the connection closes, as a cut stream does.
            self.close_connection = True
            self.send_response(reply.http_status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in reply.events or []:
                self.wfile.write(sse.encode(event))
                self.wfile.flush()

    return Handler
