"""Verification of the audit chains: recompute every event's hash and follow every link.

Read-only. ``toolcalls.services.audit.event_hash`` stays the one definition of the hash; this
module only walks the rows. An operation's chain is intact when its events are numbered 1…n
without gaps, each stored ``hash`` equals the recomputed one, each ``prev_hash`` is the previous
event's hash (``""`` for the first) and the operation's ``audit_seq``/``audit_head`` name the
last event.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from toolcalls.models import AuditEvent, Operation
from toolcalls.services.audit import event_hash

#: Rows fetched per round trip; the walk holds one chunk in memory, never a whole table.
CHUNK_SIZE = 2000


class BreakKind(enum.StrEnum):
    EDITED = "edited"  # the stored hash is not the hash of the stored content
    MISSING = "missing"  # a gap in seq: events were removed
    RELINKED = "relinked"  # prev_hash is not the previous event's hash
    HEAD_MISMATCH = "head_mismatch"  # the operation's audit_seq/audit_head miss the last event


@dataclass(frozen=True)
class ChainBreak:
    """The first broken link of one operation's chain; ``seq`` is the first event affected."""

    operation: str
    seq: int
    kind: BreakKind
    message: str

    def __str__(self) -> str:
        return f"{self.operation} #{self.seq} {self.kind}: {self.message}"


@dataclass(frozen=True)
class ChainResult:
    """One operation's chain as walked: its events read and its first break, if any."""

    operation: str
    events: int
    first_break: ChainBreak | None


def audit_chain_verify(*, operation_public_id: str | None = None) -> list[ChainBreak]:
    """The first break of every broken chain (of one operation when ``operation_public_id`` is
    given); empty when all are intact. Raises ``Operation.DoesNotExist`` for an unknown ID."""
    return [
        result.first_break
        for result in audit_chain_walk(operation_public_id=operation_public_id)
        if result.first_break is not None
    ]


def audit_chain_walk(*, operation_public_id: str | None = None) -> Iterator[ChainResult]:
    """Each operation's :class:`ChainResult`, streamed: first the operations that have events
    (in primary-key order), then those that have none. Raises ``Operation.DoesNotExist`` for an
    unknown ``operation_public_id``."""
    operations = Operation.objects.all()
    events = AuditEvent.objects.all()
    if operation_public_id is not None:
        operation_pk = (
            operations.filter(public_id=operation_public_id).values_list("pk", flat=True).first()
        )
        if operation_pk is None:
            raise Operation.DoesNotExist(f"no operation {operation_public_id}")
        operations = operations.filter(pk=operation_pk)
        events = events.filter(operation_id=operation_pk)
    # One statement reads each event with its operation's head, so both come from the same
    # snapshot: a chain being appended to while we read is never mistaken for a broken one.
    stream = (
        events.select_related("operation", "call")
        .only(
            *_EVENT_FIELDS,
            "operation__public_id",
            "operation__audit_seq",
            "operation__audit_head",
            "call__public_id",
        )
        .order_by("operation_id", "seq")
        .iterator(chunk_size=CHUNK_SIZE)
    )
    for _pk, chain in itertools.groupby(stream, key=lambda event: event.operation_id):
        yield _chain_check(chain)
    # An operation left without any event (all of them removed) is not in the stream above.
    without_events = (
        operations.filter(~Exists(AuditEvent.objects.filter(operation=OuterRef("pk"))))
        .only("public_id", "audit_seq", "audit_head")
        .order_by("pk")
        .iterator(chunk_size=CHUNK_SIZE)
    )
    for operation in without_events:
        yield ChainResult(operation.public_id, 0, _head_check(operation, last=None))


_EVENT_FIELDS = (
    "operation",
    "seq",
    "kind",
    "call",
    "approval_ref",
    "actor",
    "from_state",
    "to_state",
    "details",
    "created_at",
    "prev_hash",
    "hash",
)


def _chain_check(chain: Iterable[AuditEvent]) -> ChainResult:
    """Walk one operation's events (in seq order, at least one) to the end, keeping the first
    break: a gap, then the event's own hash, then its link, then the operation's head."""
    first_break: ChainBreak | None = None
    count = 0
    previous: AuditEvent | None = None
    operation: Operation | None = None
    for event in chain:
        count += 1
        operation = event.operation
        if first_break is None:
            first_break = _link_check(event, previous=previous)
        previous = event
    assert operation is not None, "a chain has at least one event"
    if first_break is None:
        first_break = _head_check(operation, last=previous)
    return ChainResult(operation.public_id, count, first_break)


def _link_check(event: AuditEvent, *, previous: AuditEvent | None) -> ChainBreak | None:
    operation_id = event.operation.public_id
    expected_seq = previous.seq + 1 if previous else 1
    if event.seq > expected_seq:
        return ChainBreak(
            operation_id,
            expected_seq,
            BreakKind.MISSING,
            f"{_events(expected_seq, event.seq - 1)} not stored: after "
            f"#{expected_seq - 1} comes #{event.seq}",
        )
    if event.seq < expected_seq:  # only #0 can come first: (operation, seq) is unique
        return ChainBreak(
            operation_id,
            event.seq,
            BreakKind.EDITED,
            f"event #{event.seq} ({event.kind}) is numbered before #1, where chains start",
        )
    call_id = event.call.public_id if event.call else None
    if event.hash != event_hash(event, operation_id=operation_id, call_id=call_id):
        return ChainBreak(
            operation_id,
            event.seq,
            BreakKind.EDITED,
            f"event #{event.seq} ({event.kind}) was altered: its stored hash is not the hash "
            "of its content",
        )
    expected_prev = previous.hash if previous else ""
    if event.prev_hash != expected_prev:
        after = f"event #{previous.seq}'s hash" if previous else "empty (first event)"
        return ChainBreak(
            operation_id,
            event.seq,
            BreakKind.RELINKED,
            f"event #{event.seq} ({event.kind}) links to {event.prev_hash[:12] or '(nothing)'}…, "
            f"not to {after}: an earlier event was removed, replaced or reordered",
        )
    return None


def _head_check(operation: Operation, *, last: AuditEvent | None) -> ChainBreak | None:
    """``operation``'s ``audit_seq``/``audit_head`` against its last stored event (``None``:
    it has none)."""
    last_seq, last_hash = (last.seq, last.hash) if last else (0, "")
    if operation.audit_seq == last_seq and operation.audit_head == last_hash:
        return None
    last_stored = f"the last stored event is #{last_seq}" if last else "no event is stored"
    if operation.audit_seq > last_seq:
        seq = last_seq + 1
        message = (
            f"{_events(seq, operation.audit_seq)} not stored: the operation's head is "
            f"#{operation.audit_seq}, {last_stored}"
        )
    elif operation.audit_seq < last_seq:
        seq = operation.audit_seq + 1
        message = (
            f"{_events(seq, last_seq)} beyond the operation's head #{operation.audit_seq}: "
            "written outside the chain"
        )
    else:
        seq = last_seq
        message = f"the operation's audit_head is not the hash of its last event; {last_stored}"
    return ChainBreak(operation.public_id, seq, BreakKind.HEAD_MISMATCH, message)


def _events(first: int, last: int) -> str:
    """``"event #3"`` or ``"events #3 to #5"``."""
    return f"event #{first}" if first == last else f"events #{first} to #{last}"
