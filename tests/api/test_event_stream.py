"""Live progress as Server-Sent Events: a real HTTP client reads the stream of a real server
(pytest-django's threaded live server, as ``runserver`` serves, and gunicorn) while a real Celery
worker advances the operation, each event as its step commits (no poll interval); it resumes with
``Last-Event-ID`` and never holds a transaction open."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from pytest_django.live_server_helper import LiveServer

from tests.api.support import (
    API,
    DECIDE,
    READ,
    WRITE,
    create,
    create_body,
    error_of,
    keyed_client,
    new_key,
)
from tests.conftest import REPO, wait_for
from toolcalls.demo.services import DemoSeed
from toolcalls.models import Tenant

pytestmark = [pytest.mark.django_db(transaction=True)]


def read_events(response: requests.Response) -> Iterator[dict[str, Any]]:
    """Each SSE event of ``response`` as ``{"id", "event", "data"}`` (comments skipped)."""
    event: dict[str, Any] = {}
    for raw in response.iter_lines():
        line = raw.decode()
        if line == "":
            if "event" in event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            event[name] = json.loads(value) if name == "data" else value


def stream(base: str, key: str, operation_id: str, after: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    if after is not None:
        headers["Last-Event-ID"] = after
    url = f"{base}/api/v1/operations/{operation_id}/events/stream"
    return requests.get(url, headers=headers, stream=True, timeout=60)


def start(base: str, key: str) -> str:
    response = requests.post(
        f"{base}/api/v1/operations",
        json=create_body("refund_approve"),
        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": uuid.uuid4().hex},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def gunicorn(celery_worker: Any) -> Iterator[str]:
    """``gunicorn config.wsgi`` (one worker, threads) on the test database and broker: its URL."""
    db = connection.settings_dict
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "TEST_DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "TEST_CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CALLGATE_API_STREAM_POLL_S": "30",  # every event comes as its step is published
    }
    process = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")), "config.wsgi",
            "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4",
        ],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(f"{base}/api/v1/health/live", timeout=5).status_code == 200
        except requests.RequestException:  # not listening yet, or its worker still booting
            return False

    try:
        wait_for(answers, timeout_s=60, what="gunicorn to answer")
        yield base
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.mark.worker
@pytest.mark.parametrize("server", ["live_server", "gunicorn"])
def test_a_client_follows_a_refund_live_and_resumes(
    demo: DemoSeed, celery_worker: Any, settings: Any, server: str, request: pytest.FixtureRequest
) -> None:
    # Reads 30 s apart at most: every event comes as its committed step is published.
    settings.CALLGATE_API_STREAM_POLL_S = 30
    cache.clear()
    if server == "gunicorn":
        base = request.getfixturevalue("gunicorn")
    else:
        live: LiveServer = request.getfixturevalue("live_server")
        base = live.url.replace("://localhost:", "://127.0.0.1:")
    _, service = new_key(demo.tenant, READ, WRITE, name="checkout")
    _, reviewer = new_key(demo.tenant, READ, DECIDE, name="review")
    operation_id = start(base, service)

    seen: list[dict[str, Any]] = []
    response = stream(base, service, operation_id)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Request-Id"]
    for event in read_events(response):
        seen.append(event)
        if event["event"] == "approval.requested":
            # Decided by another service while the stream stays open.
            approval = event["data"]["approval"]
            decided = requests.post(
                f"{base}/api/v1/approvals/{approval}/decide",
                json={"decision": "approve"},
                headers={"Authorization": f"Bearer {reviewer}", "Idempotency-Key": "d-1"},
                timeout=30,
            )
            assert decided.status_code == 200, decided.text
    kinds = [event["event"] for event in seen]
    notes = [event["data"].get("note") for event in seen]
    assert kinds[0] == "operation.created" and kinds[-1] == "end"
    assert "preparing to call get_order" in notes
    assert "preparing to call submit_refund" in notes
    assert "waiting for a person to approve submit_refund" in notes
    assert "approval of submit_refund: APPROVED" in notes
    assert any(note and note.endswith("→ COMPLETED") for note in notes)
    end = seen[-1]["data"]
    assert (end["id"], end["state"], end["ended"]) == (operation_id, "COMPLETED", True)
    assert "has been submitted" in end["final_text"]
    ids = [int(event["id"]) for event in seen[:-1]]
    assert ids == list(range(1, len(ids) + 1))  # every audit event, in order, once
    assert [event["data"]["sequence"] for event in seen[:-1]] == ids

    # Reconnecting after the fifth event: the rest, then the end again.
    again = list(read_events(stream(base, service, operation_id, after="5")))
    assert [event.get("id") for event in again] == [str(i) for i in ids[5:]] + [None]
    assert again[-1]["event"] == "end"


def test_a_waiting_stream_holds_no_transaction(
    demo: DemoSeed, live_server: LiveServer, settings: Any, eager_tasks: None
) -> None:
    """While the refund waits for a person, the stream polls without a transaction open, and it
    closes at CALLGATE_API_STREAM_MAX_S for the client to resume."""
    settings.CALLGATE_API_STREAM_POLL_S = 0.05
    settings.CALLGATE_API_STREAM_MAX_S = 3.0
    cache.clear()
    base = live_server.url.replace("://localhost:", "://127.0.0.1:")
    _, key = new_key(demo.tenant, READ, WRITE)
    operation_id = start(base, key)
    received: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=lambda: received.extend(read_events(stream(base, key, operation_id)))
    )
    reader.start()
    wait_for(lambda: any(e["event"] == "approval.requested" for e in received), what="parking")
    idle = []
    for _ in range(20):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%%' AND pid <> pg_backend_pid()"
            )
            idle.append(cursor.fetchone()[0])  # type: ignore[index]
        time.sleep(0.05)  # the samples span many of the stream's polls
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert idle == [0] * 20
    # Closed without an end: the operation has not ended.
    assert received[-1]["data"]["note"].endswith("→ WAITING_APPROVAL")


def test_refusals_are_json_in_the_one_shape(demo: DemoSeed, eager_tasks: None) -> None:
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    other, _ = keyed_client(Tenant.objects.create(slug="other", name="Other"), READ)
    path = f"{API}/operations/{create(client)['id']}/events/stream"
    error_of(client.get(path, HTTP_ACCEPT="application/json"), 406, "not_acceptable")
    wrong = client.get(path, HTTP_ACCEPT="text/event-stream", HTTP_LAST_EVENT_ID="seven")
    error = error_of(wrong, 400, "invalid_request")
    assert list(error["details"]["fields"]) == ["Last-Event-ID"]
    blank = client.get(path, HTTP_ACCEPT="text/event-stream", HTTP_LAST_EVENT_ID=" ")
    error_of(blank, 400, "invalid_request")
    error_of(other.get(path, HTTP_ACCEPT="text/event-stream"), 404, "not_found")


def test_a_key_holds_so_many_streams_at_once(
    demo: DemoSeed, settings: Any, eager_tasks: None
) -> None:
    """Each open stream holds a web thread: one key holds at most
    CALLGATE_API_STREAMS_PER_KEY; one more is 429 ``too_many_streams`` with ``Retry-After``,
    another key is not held back, and a stream closed (read or not) frees its slot."""
    settings.CALLGATE_API_STREAMS_PER_KEY = 2
    cache.clear()
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    other, _ = keyed_client(demo.tenant, READ)
    path = f"{API}/operations/{create(client)['id']}/events/stream"
    first, second = (client.get(path, HTTP_ACCEPT="text/event-stream") for _ in range(2))
    assert first.status_code == second.status_code == 200
    refused = client.get(path, HTTP_ACCEPT="text/event-stream")
    error = error_of(refused, 429, "too_many_streams")
    assert "CALLGATE_API_STREAMS_PER_KEY" in error["message"]
    assert refused["Retry-After"] == "15"  # a stream left by its client closes by then
    elsewhere = other.get(path, HTTP_ACCEPT="text/event-stream")
    assert elsewhere.status_code == 200
    elsewhere.close()
    first.close()  # never read: its slot is free all the same
    third = client.get(path, HTTP_ACCEPT="text/event-stream")
    assert third.status_code == 200
    assert next(iter(third.streaming_content)) == b"retry: 1000\n\n"
    for response in (second, third):
        response.close()
    again = client.get(path, HTTP_ACCEPT="text/event-stream")
    assert again.status_code == 200
    again.close()
