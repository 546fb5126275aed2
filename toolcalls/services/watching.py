"""Waiting for an operation to change, told when it does instead of asking again and again.

Every step of an operation appends audit events, so a committed append means a change to read:
when the transaction that appends events commits, :func:`operations_changed` publishes each of
their operations on the broker's Redis, channel ``callgate:<database>:operation:<pk>``
(:func:`operation_channel`), never for a transaction rolled back. :func:`operation_watch`
subscribes to one operation's channel; its ``wait`` returns as soon as a change is published,
or after a timeout: a wait never blocks longer than asked, so a lost message costs at most one
timeout. Without Redis (the embedded demo's in-memory broker) nothing is published: ``wait``
sleeps ``poll_s`` (never longer than asked), and the caller reads again, as it would after a
message.

Redis, not PostgreSQL's ``NOTIFY``: a transaction that notifies takes a database-wide lock at
commit and holds it through its WAL flush, so every step of every worker would commit one after
another; a publish is a message to Redis after the commit, and costs nothing when nobody listens.
A thread of the process sends the publications (:class:`_Publisher`), so a step never waits for
Redis: what commits meanwhile goes out in the next batch, once per operation.

Read what you wait for *after* entering the watch: a change committed before the subscription
is then seen by that read, one committed after it wakes ``wait``.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache

import redis
from django.conf import settings

log = logging.getLogger(__name__)

#: ``wait(timeout_s)``: returns when the watched operation changed or ``timeout_s`` seconds
#: passed, whichever is first.
Wait = Callable[[float], None]

#: Seconds a publish or a subscription may take to reach Redis before it is given up.
_SOCKET_TIMEOUT_S = 1.0


def operation_channel(client: redis.Redis, operation_pk: int) -> str:
    """The channel a committed step of operation ``operation_pk`` is published on. It names the
    broker's Redis database: channels, unlike keys, are shared by all of a server's databases,
    and two deployments on one server must not wake each other's watchers."""
    database = client.connection_pool.connection_kwargs.get("db", 0)
    return f"callgate:{database}:operation:{int(operation_pk)}"


@cache
def _redis() -> redis.Redis | None:
    """The broker's Redis (one client per process), or ``None`` when the broker is not Redis."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    return redis.Redis.from_url(
        url, socket_timeout=_SOCKET_TIMEOUT_S, socket_connect_timeout=_SOCKET_TIMEOUT_S
    )


def operations_changed(operation_pks: Iterable[int]) -> None:
    """Publish that each of ``operation_pks`` changed (after the commit that changed them), on
    this process's publisher thread: this returns at once. A publish that fails is logged and
    dropped: a watcher's wait ends at its timeout instead."""
    if _redis() is None:
        return
    _publisher().put(operation_pks)


class _Publisher:
    """A daemon thread sending the publications handed to :meth:`put` in batches: each batch is
    every operation handed over since the last one, published once each, in one pipeline."""

    def __init__(self) -> None:
        self._pending: queue.SimpleQueue[int] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="callgate-publisher", daemon=True).start()

    def put(self, operation_pks: Iterable[int]) -> None:
        for operation_pk in operation_pks:
            self._pending.put(operation_pk)

    def _serve(self) -> None:
        while True:
            batch = {self._pending.get()}
            while not self._pending.empty():
                batch.add(self._pending.get())
            try:
                _publish(batch)
            except Exception:  # a batch lost, never the thread: watchers read at their timeout
                log.exception("operation changes not published")


def _publish(operation_pks: set[int]) -> None:
    client = _redis()
    if client is None:
        return
    try:
        with client.pipeline(transaction=False) as pipe:
            for operation_pk in sorted(operation_pks):
                pipe.publish(operation_channel(client, operation_pk), b"")
            pipe.execute()
    except redis.RedisError:
        log.warning("operation change not published; watchers read at their timeout")


#: This process's publisher, started at its first publication; a forked child (a worker's
#: pool process) starts its own, no thread surviving a fork.
_STARTED: list[_Publisher] = []
_STARTING = threading.Lock()


def _publisher() -> _Publisher:
    with _STARTING:
        if not _STARTED:
            _STARTED.append(_Publisher())
        return _STARTED[0]


def _forget_publisher() -> None:
    global _STARTING
    _STARTING = threading.Lock()
    _STARTED.clear()


os.register_at_fork(after_in_child=_forget_publisher)


@contextmanager
def operation_watch(*, operation_pk: int, poll_s: float) -> Iterator[Wait]:
    """Watch operation ``operation_pk`` within the block (see the module docstring); ``poll_s``:
    the seconds between reads where no change is published (no Redis, or Redis out of reach)."""
    subscription = _subscribed(operation_pk, poll_s)
    try:
        if subscription is None:
            yield lambda timeout_s: _slept(poll_s, timeout_s)
        else:
            yield lambda timeout_s: _published(subscription, timeout_s, poll_s)
    finally:
        if subscription is not None:
            subscription.close()


def _subscribed(operation_pk: int, poll_s: float) -> redis.client.PubSub | None:
    """A subscription to the operation's channel, or ``None`` without Redis (or out of reach)."""
    client = _redis()
    if client is None:
        return None
    subscription = client.pubsub(ignore_subscribe_messages=True)
    try:
        subscription.subscribe(operation_channel(client, operation_pk))
    except redis.RedisError:
        log.warning("cannot watch operation %s; reading every %s s", operation_pk, poll_s)
        subscription.close()
        return None
    return subscription


def _slept(poll_s: float, timeout_s: float) -> None:
    time.sleep(max(0.0, min(poll_s, timeout_s)))


def _published(subscription: redis.client.PubSub, timeout_s: float, poll_s: float) -> None:
    """Return at the first message on ``subscription`` or after ``timeout_s`` seconds (after
    ``poll_s`` when Redis is out of reach: the caller reads again)."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while (left := deadline - time.monotonic()) > 0:
        try:
            if subscription.get_message(timeout=left) is not None:
                return
        except redis.RedisError:
            _slept(poll_s, left)
            return
