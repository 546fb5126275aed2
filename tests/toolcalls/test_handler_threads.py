"""Tool handlers run in reused threads (and keep their database connection), never in a thread
a handler still holds."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from toolcalls.services.handler_threads import handler_run, handler_threads_stop


def _backend() -> tuple[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return threading.current_thread().name, cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_consecutive_handlers_share_a_thread_and_its_connection() -> None:
    [first] = handler_run(_backend, timeout_s=5)
    [second] = handler_run(_backend, timeout_s=5)
    assert first == second and first[0] == "tool-handler"
    handler_threads_stop()
    [third] = handler_run(_backend, timeout_s=5)
    assert third[1] != first[1]  # a stopped thread closed its connection


def test_a_handler_past_its_timeout_keeps_its_thread_and_the_next_gets_another() -> None:
    release = threading.Event()

    def stuck() -> str:
        release.wait(5)
        return "late"

    assert handler_run(stuck, timeout_s=0.05) == []
    assert handler_run(lambda: "next", timeout_s=5) == ["next"]
    release.set()
