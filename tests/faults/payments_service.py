"""A fake payments provider with idempotency keys, run as its own process by the fault
suite (``python tests/faults/payments_service.py --db FILE --port-file FILE``).

Standard library only, so it starts in a blink and shares nothing with the workers but HTTP.
Its SQLite ledger is the downstream truth the suite checks Callgate against:

- ``POST /refunds`` (JSON ``{"order_id", "amount_cents"}``, header ``Idempotency-Key``): a new key
  applies the effect once and stores the response; the same key with the same body returns the
  stored response (header ``Idempotent-Replayed: true``) and applies nothing; the same key with
  another body is refused with 409 and applies nothing.
- ``GET /refunds?key=K``: the stored response of key ``K`` (200) or 404 — for reconciliation.
- ``GET /refunds?order_id=O``: ``{"data": [responses]}``, the refunds of one order.
- ``GET /_ledger``: every request received (with whether it was answered from the stored
  response) and every effect applied (the suite's assertions).
- ``POST /_reset``: empties the ledger; ``POST /_config`` ``{"delay_ms": N}`` makes the answer
  to each payment come ``N`` ms after the payment was applied (a slow provider: a client
  stopped meanwhile has paid and not heard so; the lock is not held while it waits).

``effects`` has no uniqueness on the key on purpose: a double effect shows as two rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY, method TEXT, path TEXT, idempotency_key TEXT, body TEXT,
    status INTEGER, replayed INTEGER, received_at REAL
);
CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, request_sha256 TEXT, response TEXT);
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY, refund_id TEXT, idempotency_key TEXT, order_id TEXT,
    amount_cents INTEGER, applied_at REAL
);
"""
REUSED = (
    "Keys for idempotent requests can only be used with the same parameters they were first "
    "used with."
)


class Ledger:
    """The provider's state; one lock makes each request's check-and-apply atomic."""

    def __init__(self, path: Path) -> None:
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.executescript(SCHEMA)
        self.delay_ms = 0

    def record(
        self, method: str, path: str, key: str, body: str, status: int, replayed: bool = False
    ) -> None:
        with self.lock:
            self.db.execute(
                "INSERT INTO requests (method, path, idempotency_key, body, status, replayed, "
                "received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (method, path, key, body, status, int(replayed), time.time()),
            )

    def pay(self, key: str, order_id: str, amount_cents: int) -> tuple[int, dict[str, Any], bool]:
        """(status, response, replayed) for a refund request under ``key``."""
        fingerprint = hashlib.sha256(
            json.dumps([order_id, amount_cents], separators=(",", ":")).encode()
        ).hexdigest()
        with self.lock:
            row = self.db.execute(
                "SELECT request_sha256, response FROM keys WHERE key = ?", (key,)
            ).fetchone()
            if row is not None:
                if row[0] != fingerprint:
                    error = {"type": "idempotency_error", "message": REUSED}
                    return 409, {"error": error}, False
                return 200, json.loads(row[1]), True
            count = self.db.execute("SELECT count(*) FROM effects").fetchone()[0]
            response = {
                "id": f"re_{count + 1:06d}",
                "object": "refund",
                "order_id": order_id,
                "amount_cents": amount_cents,
                "status": "succeeded",
            }
            self.db.execute("BEGIN IMMEDIATE")  # the effect and its key, or neither
            try:
                self.db.execute(
                    "INSERT INTO effects (refund_id, idempotency_key, order_id, amount_cents, "
                    "applied_at) VALUES (?, ?, ?, ?, ?)",
                    (response["id"], key, order_id, amount_cents, time.time()),
                )
                self.db.execute(
                    "INSERT INTO keys (key, request_sha256, response) VALUES (?, ?, ?)",
                    (key, fingerprint, json.dumps(response)),
                )
            except sqlite3.Error:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")
            return 200, response, False

    def by_key(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            row = self.db.execute("SELECT response FROM keys WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def by_order(self, order_id: str) -> list[dict[str, Any]]:
        with self.lock:
            rows = self.db.execute(
                "SELECT k.response FROM effects e JOIN keys k ON k.key = e.idempotency_key "
                "WHERE e.order_id = ? ORDER BY e.id",
                (order_id,),
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def dump(self) -> dict[str, list[dict[str, Any]]]:
        with self.lock:
            requests = self.db.execute(
                "SELECT method, path, idempotency_key, body, status, replayed FROM requests "
                "ORDER BY id"
            ).fetchall()
            effects = self.db.execute(
                "SELECT refund_id, idempotency_key, order_id, amount_cents FROM effects ORDER BY id"
            ).fetchall()
        return {
            "requests": [
                dict(zip(("method", "path", "key", "body", "status", "replayed"), row, strict=True))
                for row in requests
            ],
            "effects": [
                dict(zip(("refund_id", "key", "order_id", "amount_cents"), row, strict=True))
                for row in effects
            ],
        }

    def reset(self) -> None:
        with self.lock:
            self.db.executescript("DELETE FROM requests; DELETE FROM keys; DELETE FROM effects;")
            self.delay_ms = 0


class Handler(BaseHTTPRequestHandler):
    ledger: Ledger
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the ledger is the log
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        if url.path == "/_ledger":
            self._send(200, self.ledger.dump())
            return
        if url.path != "/refunds":
            self._send(404, {"error": {"type": "not_found"}})
            return
        if "key" in query:
            stored = self.ledger.by_key(query["key"])
            status = 200 if stored else 404
            body = stored or {"error": {"type": "not_found", "message": "no such key"}}
        else:
            status, body = 200, {"data": self.ledger.by_order(query.get("order_id", ""))}
        self.ledger.record("GET", self.path, query.get("key", ""), "", status)
        self._send(status, body)

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if url.path == "/_reset":
            self.ledger.reset()
            self._send(200, {"ok": True})
            return
        if url.path == "/_config":
            self.ledger.delay_ms = int(json.loads(raw or "{}").get("delay_ms", 0))
            self._send(200, {"ok": True})
            return
        if url.path != "/refunds":
            self._send(404, {"error": {"type": "not_found"}})
            return
        key = self.headers.get("Idempotency-Key", "")
        status, body, replayed = self._refund(key, raw)
        self.ledger.record("POST", url.path, key, raw, status, replayed)
        self._send(status, body, replayed=replayed)

    def _refund(self, key: str, raw: str) -> tuple[int, dict[str, Any], bool]:
        try:
            payload = json.loads(raw)
            order_id, amount = payload["order_id"], payload["amount_cents"]
        except (ValueError, KeyError, TypeError):
            return 400, {"error": {"type": "invalid_request", "message": "bad body"}}, False
        if not key or not isinstance(order_id, str) or not isinstance(amount, int) or amount < 1:
            return 400, {"error": {"type": "invalid_request", "message": "bad request"}}, False
        answer = self.ledger.pay(key, order_id, amount)
        if self.ledger.delay_ms:
            time.sleep(self.ledger.delay_ms / 1000)
        return answer

    def _send(self, status: int, body: dict[str, Any], *, replayed: bool = False) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, type=Path, help="SQLite file of the ledger")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--port-file", type=Path, help="where to write the port once listening")
    args = parser.parse_args()
    Handler.ledger = Ledger(args.db)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.port_file:
        partial = args.port_file.with_suffix(".partial")
        partial.write_text(str(server.server_address[1]))
        os.replace(partial, args.port_file)  # readers never see a half-written port
    server.serve_forever()


if __name__ == "__main__":
    main()
