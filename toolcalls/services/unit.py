"""One unit of work per step of the loop: lock → change → audit → save once → wake-ups.

A :class:`Step` holds the rows a step locked (the operation first, then the call the step is
about; an app with a row of its own, an approval, locks it after that), collects which fields of
which rows changed and the audit events written, and at the end saves each changed row once
(the union of its changed fields) and registers the wake-ups to send after commit. On
PostgreSQL the events and the rows changed alone are written in one statement
(:mod:`toolcalls.services.writes`). Nothing else in ``toolcalls.services`` writes a row a step
holds.

Leases (a token and an expiry on an operation or a call) fence a worker's claim: they are taken,
checked and cleared here only.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Unpack

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connections, models, transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from toolcalls.compiled import Compiled
from toolcalls.guards import PastCall
from toolcalls.models import AuditEvent, IdempotencyRecord, Operation, ToolCall
from toolcalls.services.audit import EventFields, audit_event, audit_insert
from toolcalls.services.requester import requester_read, requester_ready
from toolcalls.services.writes import Change, row_insert_reading
from toolcalls.states import CallState

Leased = Operation | ToolCall


class Step:
    """The rows one transaction holds and what it changed in them.

    ``operation`` is locked; so is :attr:`call`, the call a :func:`call_step` is about.
    """

    def __init__(self, operation: Operation, calls: Sequence[ToolCall] = ()) -> None:
        self.operation = operation
        self._call: ToolCall | None = calls[0] if calls else None
        self._held: dict[int, ToolCall] = {call.pk: call for call in calls}
        self._sets: dict[int, list[ToolCall]] = {}
        self._changed: dict[int, tuple[models.Model, set[str]]] = {}
        self._events: list[AuditEvent] = []
        self._wakeups: list[Callable[[], None]] = []
        self._history: list[PastCall] | None = None
        self._earlier: dict[int, set[str]] = {}
        self._reserved: list[int] = []
        self._inserts: list[models.Model] = []

    @property
    def call(self) -> ToolCall:
        """The call this step is about (the one :func:`call_step` locked)."""
        assert self._call is not None, "an operation step is about no call"
        return self._call

    def change(self, row: models.Model, *fields: str) -> None:
        """Note that ``fields`` of ``row`` changed; the row is saved once, at the end."""
        entry = self._changed.setdefault(id(row), (row, set()))
        entry[1].update(fields)

    def audit(self, **fields: Unpack[EventFields]) -> None:
        """Append an event to the operation's chain (inserted with the step's other events)."""
        self._events.append(audit_event(self.operation, **fields))
        self.change(self.operation, "audit_seq", "audit_head")

    def wake(self, action: Callable[[], None]) -> None:
        """Run ``action`` (a wake-up for a worker) after the transaction commits."""
        self._wakeups.append(action)

    def hold(self, turn_id: int, calls: list[ToolCall]) -> None:
        """Keep ``calls`` (just created) as the current rows of the set of turn ``turn_id``."""
        self._held.update({call.pk: call for call in calls})
        self._sets[turn_id] = calls

    def call_set(self, turn_id: int) -> list[ToolCall]:
        """The calls of the set of turn ``turn_id``, read once per step; a row this step holds
        stands in for its stored copy, so the set always shows this step's changes."""
        if turn_id not in self._sets:
            rows = _CALL_SET.run(turn_id=turn_id)
            self._sets[turn_id] = [self._held.get(row.pk, row) for row in rows]
        return self._sets[turn_id]

    def earlier_results(self, turn_id: int) -> set[str]:
        """The result digests of the operation's successful calls outside the set of turn
        ``turn_id`` (read once per step; a call step on PostgreSQL reads those of its own set
        with the operation)."""
        if turn_id not in self._earlier:
            rows = _EARLIER_RESULTS.run(operation_pk=self.operation.pk, turn_id=turn_id)
            self._earlier[turn_id] = set(rows)
        return self._earlier[turn_id]

    def history(self) -> list[PastCall]:
        """The operation's calls stored before this step read them (read once per step)."""
        if self._history is None:
            rows = _HISTORY.run(operation_pk=self.operation.pk)
            self._history = [PastCall(*row) for row in rows]
        return self._history

    def insert_reading_history(self, row: models.Model, *, calls: int = 0) -> None:
        """Insert ``row`` (new) and read :meth:`history` with it, in one statement; on
        PostgreSQL the same statement reserves ids for ``calls`` new calls
        (:meth:`reserved_call_ids`)."""
        values = {"operation_pk": self.operation.pk}
        reserve = (ToolCall, calls) if calls else None
        found, self._reserved = row_insert_reading(row, _HISTORY, values, reserve=reserve)
        self._history = [PastCall(*values) for values in found]

    def reserved_call_ids(self, count: int) -> list[int]:
        """``count`` ids reserved for new calls (:meth:`insert_reading_history`), or ``[]``
        when the step reserved none (or fewer)."""
        if len(self._reserved) < count:
            return []
        taken, self._reserved = self._reserved[:count], self._reserved[count:]
        return taken

    def insert(self, rows: Sequence[models.Model]) -> None:
        """Insert ``rows`` (new) with the step's other writes, as they are when it flushes
        (their changes before that are part of the insert): under the ids set on them from
        :meth:`reserved_call_ids`, or else under ids the database gives, not read back (a row
        inserted so is not saved again, nor is its id needed later in the step)."""
        self._inserts.extend(rows)

    def held(self, call_pk: int) -> ToolCall | None:
        """The call ``call_pk`` as this step holds it (locked, or created by it), or ``None``."""
        return self._held.get(call_pk)

    def held_set(self) -> list[ToolCall] | None:
        """The one call set this step holds (the set of the call it is about, or the set it
        created), in position order; ``None`` when it holds no set."""
        if len(self._sets) != 1:
            return None
        return sorted(next(iter(self._sets.values())), key=lambda call: call.position)

    def flush(self) -> None:
        """Write what the step changed, each changed row once: rows of one model with the same
        changed fields in one UPDATE; the events and every row changed alone in one statement
        (:func:`audit_insert`). First, the first wake-up whose work this worker can claim in
        the step does (``enqueue.WakeUp.claim``): its changes are written with the rest."""
        self._claim_woken()
        groups: dict[tuple[type[models.Model], frozenset[str]], list[models.Model]] = {}
        inserting = {id(row) for row in self._inserts}
        for row, fields in self._changed.values():
            if fields and id(row) not in inserting:
                groups.setdefault((type(row), frozenset(fields)), []).append(row)
        alone: list[Change] = []
        for (model, names), rows in groups.items():
            saved = sorted(names | _TOUCHED.get(model, set()))
            if len(rows) == 1:
                alone.append((rows[0], saved))
            else:
                _update_together(model, saved, rows)
        audit_insert(self._events, alone, self._inserts)
        self._events, self._inserts = [], []
        self._changed.clear()
        for action in self._wakeups:
            # robust: a broker that refuses a wake-up leaves the committed work to recovery.
            transaction.on_commit(action, robust=True)
        self._wakeups.clear()

    def _claim_woken(self) -> None:
        for number, action in enumerate(self._wakeups):
            claim = getattr(action, "claim", None)  # an ``enqueue.WakeUp``
            replacement = claim(self) if claim is not None else None
            if replacement is not None:
                self._wakeups[number] = replacement
                return


#: The calls of one set (``turn_id``).
_CALL_SET: Compiled[ToolCall] = Compiled(
    lambda turn_id: ToolCall.objects.filter(turn_id=turn_id), turn_id=int
)
#: The result digests of an operation's successful calls outside the set of turn ``turn_id``.
_EARLIER_RESULTS: Compiled[str] = Compiled(
    lambda operation_pk, turn_id: (
        ToolCall.objects.filter(operation_id=operation_pk, state=CallState.SUCCEEDED)
        .exclude(turn_id=turn_id)
        .order_by()
        .values_list("result_sha256", flat=True)
    ),
    operation_pk=int,
    turn_id=int,
)
#: The fields of :class:`PastCall` of each of an operation's calls (``operation_pk``).
_HISTORY: Compiled[tuple[Any, ...]] = Compiled(
    lambda operation_pk: ToolCall.objects.filter(operation_id=operation_pk).values_list(
        "provider_call_id",
        "tool_name",
        "arguments_sha256",
        "turn__index",
        "position",
        "state",
        "error_code",
    ),
    operation_pk=int,
)


#: Fields saved with every change of a row of the model (``auto_now``).
_TOUCHED: dict[type[models.Model], set[str]] = {
    Operation: {"updated_at"},
    ToolCall: {"updated_at"},
    IdempotencyRecord: {"updated_at"},
}


def _update_together(
    model: type[models.Model], fields: list[str], rows: list[models.Model]
) -> None:
    if "updated_at" in fields:
        now = timezone.now()  # ``bulk_update`` does not apply ``auto_now``
        for row in rows:
            row.updated_at = now  # type: ignore[attr-defined]
    model._default_manager.bulk_update(rows, fields)


#: A condition on the operation a step locks: a ``Q``, or a function of the time now giving
#: one. A function's query is compiled once (:mod:`toolcalls.compiled`), so it must be
#: a module-level one; a ``Q`` is compiled on every step.
Where = Q | Callable[[datetime], Q]


@contextmanager
def operation_step(
    operation_pk: int,
    *,
    where: Where | None = None,
    related: Sequence[str] = ("tenant",),
    requester: bool = False,
) -> Iterator[Step | None]:
    """A durable transaction holding operation ``operation_pk`` locked (when it also matches
    ``where``; else the step is ``None``), saved once at the end. With ``requester``, the same
    statement also reads what authorizing calls needs of the requester
    (:mod:`toolcalls.services.requester`)."""
    with transaction.atomic(durable=True):
        operation = _locked(operation_pk, where, tuple(related), requester)
        if operation is not None and requester:
            requester_ready(operation)
        step = Step(operation) if operation is not None else None
        yield step
        if step is not None:
            step.flush()


def _locked(
    operation_pk: int, where: Where | None, related: tuple[str, ...], requester: bool
) -> Operation | None:
    if isinstance(where, Q):
        return _locking(where, related, requester).filter(pk=operation_pk).first()
    values: dict[str, Any] = {"now": timezone.now()} if where is not None else {}
    rows = _locking_compiled(where, related, requester).run(operation_pk=operation_pk, **values)
    return rows[0] if rows else None


def _locking(where: Q, related: tuple[str, ...], requester: bool) -> QuerySet[Operation]:
    rows = Operation.objects.select_for_update(of=("self",)).select_related(*related)
    if requester:
        rows = requester_read(rows, postgresql=_postgresql())
    return rows.filter(where)


@functools.cache
def _locking_compiled(
    where: Callable[[datetime], Q] | None, related: tuple[str, ...], requester: bool
) -> Compiled[Operation]:
    def build(operation_pk: int, now: datetime | None = None) -> QuerySet[Operation]:
        condition = where(now) if where is not None and now is not None else Q()
        return _locking(condition, related, requester).filter(pk=operation_pk)

    kinds: dict[str, type] = {"operation_pk": int, **({"now": datetime} if where else {})}
    return Compiled(build, **kinds)


def _postgresql() -> bool:
    return connections[Operation.objects.db].vendor == "postgresql"


@contextmanager
def call_step(
    call_pk: int, *, model_input: bool = False, requester: bool = False
) -> Iterator[Step]:
    """A durable transaction holding call ``call_pk`` and its operation locked (operation first,
    as every step locks), with the operation's tenant and the call's turn loaded, and the other
    calls of its set (locked, read in the same statement: :meth:`Step.call_set`); saved once at
    the end. Raises ``ToolCall.DoesNotExist`` for an unknown ``call_pk``.

    Only the operation and the set are locked: the tenant and the turn are read, never written,
    and locking the tenant would serialise every operation of the tenant. The turn's request and
    reply are not read, nor the operation's conversation and opening input unless
    ``model_input`` (with its replay script): a step that will likely claim the next model turn
    (:func:`model_input_load`) asks for them. On PostgreSQL the operation comes with the result
    digests outside the call's set (:meth:`Step.earlier_results`). With ``requester``, as for
    :func:`operation_step`: what authorizing the call needs of the requester.
    """
    with transaction.atomic(durable=True):
        postgresql = _postgresql()
        shape = _call_operation(postgresql, model_input, requester)
        operations = shape.run(call_pk=call_pk)
        calls = _CALL_SET_LOCKED.run(call_pk=call_pk) if operations else []
        call = next((row for row in calls if row.pk == call_pk), None)
        if call is None:
            raise ToolCall.DoesNotExist(f"no call {call_pk}")
        if requester:
            requester_ready(operations[0])
        step = Step(operations[0], [call])
        step.hold(call.turn_id, calls)
        if postgresql:
            earlier = operations[0].earlier_results  # type: ignore[attr-defined]
            step._earlier[call.turn_id] = set(earlier)
        yield step
        step.flush()


#: What a call step reads of its operation only when asked (``model_input``): the
#: conversation, which grows with every turn, and the operation's opening input.
MODEL_INPUT = ("conversation", "messages", "input_text", "instructions")
#: An operation's :data:`MODEL_INPUT` and its replay script (``operation_pk``).
_MODEL_INPUT_ROW: Compiled[Operation] = Compiled(
    lambda operation_pk: (
        Operation.objects.select_related("replay_script")
        .only("replay_script", *MODEL_INPUT)
        .filter(pk=operation_pk)
    ),
    operation_pk=int,
)


def model_input_load(operation: Operation) -> None:
    """Load into ``operation``, as a call step read it (without :data:`MODEL_INPUT`), its model
    input and its replay script, in one statement: what a model turn claimed in that step
    needs. An operation read whole is left as it is."""
    if not set(MODEL_INPUT) & operation.get_deferred_fields():
        return
    row = _MODEL_INPUT_ROW.run(operation_pk=operation.pk)[0]
    for name in MODEL_INPUT:
        setattr(operation, name, getattr(row, name))
    operation.replay_script = row.replay_script


@functools.cache
def _call_operation(postgresql: bool, model_input: bool, requester: bool) -> Compiled[Operation]:
    """The operation of call ``call_pk``, locked, with its tenant; its :data:`MODEL_INPUT` and
    replay script only with ``model_input``; its requester and ``requester_member`` only with
    ``requester``; on PostgreSQL, annotated with ``earlier_results`` (an array only PostgreSQL
    returns)."""

    def build(call_pk: int) -> QuerySet[Operation]:
        rows = Operation.objects.select_for_update(of=("self",)).filter(
            pk=Subquery(ToolCall.objects.filter(pk=call_pk).values("operation_id"))
        )
        if model_input:
            rows = rows.select_related("tenant", "replay_script")
        else:
            rows = rows.select_related("tenant").defer(*MODEL_INPUT)
        if requester:
            rows = requester_read(rows, postgresql=postgresql)
        if postgresql:
            rows = rows.annotate(earlier_results=_earlier_results(call_pk))
        return rows

    return Compiled(build, call_pk=int)


def _earlier_results(call_pk: int) -> ArraySubquery:
    """The result digests of the operation's successful calls outside the set of ``call_pk``."""
    return ArraySubquery(
        ToolCall.objects.filter(operation_id=OuterRef("pk"), state=CallState.SUCCEEDED)
        .exclude(turn_id=Subquery(ToolCall.objects.filter(pk=call_pk).values("turn_id")))
        .order_by()
        .values("result_sha256")
    )


#: The id of the idempotency record a call holds (its key's record names it as the holder).
_HELD_RECORD = Subquery(IdempotencyRecord.objects.filter(call_id=OuterRef("pk")).values("pk")[:1])


#: The set of call ``call_pk``, locked, with their turn (not the turn's bodies): the other
#: calls of the set are read with it, for settling the set, in the same statement. Locking them
#: waits for nobody: every step locks the operation first. Each call comes with the id of the
#: idempotency record it holds (``idempotency_record_id``, ``None`` for none), for settling it.
_CALL_SET_LOCKED: Compiled[ToolCall] = Compiled(
    lambda call_pk: (
        ToolCall.objects.select_for_update(of=("self",))
        .select_related("turn")
        .defer("turn__request_frame", "turn__request_items", "turn__reply")
        .annotate(idempotency_record_id=_HELD_RECORD)
        .filter(turn_id=Subquery(ToolCall.objects.filter(pk=call_pk).values("turn_id")))
    ),
    call_pk=int,
)


def lease_free(now: datetime) -> Q:
    """Rows no worker holds at ``now``: no lease, or one that expired (application clock)."""
    return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)


def lease_take(step: Step, row: Leased, *, at_least_ms: int = 0) -> str:
    """Give ``row`` a new lease token, valid ``CALLGATE_LEASE_MS`` or ``at_least_ms`` (ms),
    whichever is longer; returns the token."""
    row.lease_token = secrets.token_hex(16)
    valid_ms = max(settings.CALLGATE_LEASE_MS, at_least_ms)
    row.lease_expires_at = timezone.now() + timedelta(milliseconds=valid_ms)
    step.change(row, "lease_token", "lease_expires_at")
    return row.lease_token


def lease_held(row: Leased, token: str) -> bool:
    """Whether the worker holding ``token`` still holds ``row``."""
    return bool(token) and row.lease_token == token


def lease_expired(row: Leased, now: datetime) -> bool:
    """Whether ``row``'s lease ran out before ``now`` (its worker stopped answering)."""
    return row.lease_expires_at is not None and row.lease_expires_at < now


def lease_clear(step: Step, row: Leased) -> None:
    """End ``row``'s lease: a worker that held it can no longer record anything."""
    if row.lease_token or row.lease_expires_at:
        row.lease_token, row.lease_expires_at = "", None
        step.change(row, "lease_token", "lease_expires_at")
