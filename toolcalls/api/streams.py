"""Live progress of one operation as Server-Sent Events (``text/event-stream``).

Every audit event of the operation becomes one SSE event, in order: ``id`` is its ``sequence``
(so a client that reconnects with ``Last-Event-ID`` resumes after it), ``event`` its ``kind``,
``data`` the event as the events list shows it plus ``note``, a line for people ("preparing to
call submit_refund"). Once the operation has ended and every event was sent, one ``end`` event
carries the operation (its state, final text and reason) and the stream closes.

Each read is one short autocommit read (no transaction is held open between reads, so none
sits idle in transaction); then the thread waits for the operation's next committed change
(``toolcalls.services.watching``: each committed step is published on the broker's Redis, so
events arrive as they are recorded) for at most ``CALLGATE_API_STREAM_POLL_S`` seconds, the
time between reads where nothing is published (no Redis: the embedded demo). A stream lasts at most
``CALLGATE_API_STREAM_MAX_S`` seconds; then it closes and the client reconnects with
``Last-Event-ID``, as EventSource does by itself. A comment line every ``KEEPALIVE_S`` seconds
keeps proxies from closing an idle stream.

Each open stream holds a web thread, so one API key holds at most
``CALLGATE_API_STREAMS_PER_KEY`` streams at once (:func:`stream_slot_take`): slots in the
default cache, each taken with an atomic ``add`` and given back when its stream closes. A
stream whose client went away closes at its next write (within ``KEEPALIVE_S``), so a client
refused is told to retry after that (``Retry-After``); a slot whose process died frees itself
when its stream would have ended anyway. With the default cache
(process memory) each web process counts on its own; set ``CACHE_URL`` to Redis to count across
them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection

from approvals.models import ApprovalRequest
from toolcalls.api.serializers import EventSerializer, OperationSerializer
from toolcalls.models import AuditEvent, Operation
from toolcalls.services.watching import Wait, operation_watch
from toolcalls.states import OPERATION_TERMINAL, AuditKind

#: Seconds between comment lines on a stream that has nothing new.
KEEPALIVE_S = 15.0
#: Events read per poll (a stream catching up reads again at once).
BATCH = 200


def progress_note(event: AuditEvent, tool: str) -> str:
    """One line for people about ``event``; ``tool``: the tool of its call or approval."""
    if event.kind == AuditKind.CALL_PROPOSED:
        return f"preparing to call {tool}"
    if event.kind == AuditKind.APPROVAL_REQUESTED:
        return f"waiting for a person to approve {tool}"
    if event.kind == AuditKind.APPROVAL_TRANSITION:
        return f"approval of {tool}: {event.to_state}"
    if event.from_state or event.to_state:
        return f"{event.from_state or '-'} → {event.to_state or '-'}"
    return event.kind.replace("_", " ").replace(".", ": ")


def sse(*, event: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE event (``data`` as one line of JSON)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def stream_slot_take(*, key_pk: int) -> str | None:
    """One of the ``CALLGATE_API_STREAMS_PER_KEY`` stream slots of API key ``key_pk`` (its
    cache key), or ``None`` when every one is taken. Give it back with
    :func:`operation_stream`'s ``slot`` (when the stream closes) or :func:`stream_slot_give`."""
    hold_s = settings.CALLGATE_API_STREAM_MAX_S + _SLOT_MARGIN_S
    for number in range(settings.CALLGATE_API_STREAMS_PER_KEY):
        slot = f"callgate:stream:{key_pk}:{number}"
        if cache.add(slot, True, timeout=hold_s):
            return slot
    return None


def stream_slot_give(slot: str) -> None:
    """Give back a slot :func:`stream_slot_take` took."""
    cache.delete(slot)


#: Seconds a slot outlives the longest stream: the time to close one.
_SLOT_MARGIN_S = 30


def operation_stream(*, operation_pk: int, after: int, slot: str) -> Iterator[bytes]:
    """The operation's events after sequence ``after``, then ``end`` once it has ended; stops
    after ``CALLGATE_API_STREAM_MAX_S`` seconds. ``slot`` (:func:`stream_slot_take`) is given
    back when the stream is closed (the response's end, or the client gone), read or not."""
    return _SlotHeld(_events_stream(operation_pk, after), slot)


class _SlotHeld(Iterator[bytes]):
    """``chunks``, giving ``slot`` back once closed (a generator not yet started would not run
    its ``finally``: the server may close a response before reading it)."""

    def __init__(self, chunks: Generator[bytes, None, None], slot: str) -> None:
        self._chunks = chunks
        self._slot: str | None = slot

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        try:
            self._chunks.close()
        finally:
            if self._slot is not None:
                stream_slot_give(self._slot)
                self._slot = None


def _events_stream(operation_pk: int, after: int) -> Generator[bytes, None, None]:
    yield b"retry: 1000\n\n"  # reconnect after a second when the stream closes early
    poll_s = settings.CALLGATE_API_STREAM_POLL_S
    with operation_watch(operation_pk=operation_pk, poll_s=poll_s) as wait:
        yield from _stream(operation_pk, after, wait)


def _stream(operation_pk: int, after: int, wait: Wait) -> Iterator[bytes]:
    started = last_sent = time.monotonic()
    while time.monotonic() - started < settings.CALLGATE_API_STREAM_MAX_S:
        ended = _ended(operation_pk)  # read first: events up to the ending are then all visible
        events = _events(operation_pk, after)
        for event, tool in events:
            data = {**EventSerializer(event).data, "note": progress_note(event, tool)}
            yield sse(event=event.kind, data=data, event_id=event.seq)
            after = event.seq
        if events:
            last_sent = time.monotonic()
            if len(events) == BATCH:
                continue
        if ended:
            operation = Operation.objects.select_related("tenant").get(pk=operation_pk)
            yield sse(event="end", data=OperationSerializer(operation).data)
            return
        if time.monotonic() - last_sent >= KEEPALIVE_S:
            yield b": keep-alive\n\n"
            last_sent = time.monotonic()
        wait(settings.CALLGATE_API_STREAM_POLL_S)


def _ended(operation_pk: int) -> bool:
    assert not connection.in_atomic_block, "a stream must not hold a transaction while it waits"
    state = Operation.objects.filter(pk=operation_pk).values_list("state", flat=True).get()
    return state in OPERATION_TERMINAL


def _events(operation_pk: int, after: int) -> list[tuple[AuditEvent, str]]:
    """The next events after sequence ``after``, each with its call's or approval's tool."""
    rows = AuditEvent.objects.filter(operation_id=operation_pk, seq__gt=after)
    events = list(rows.select_related("call").order_by("seq")[:BATCH])
    refs = {event.approval_ref for event in events if event.approval_ref}
    tools = dict(
        ApprovalRequest.objects.filter(public_id__in=refs).values_list("public_id", "tool_name")
    )
    return [
        (event, event.call.tool_name if event.call else tools.get(event.approval_ref, ""))
        for event in events
    ]
