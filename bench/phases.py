"""The measurements. Each phase returns its figures; :mod:`bench.run` runs them in order.

Call only after :func:`bench.env.django_setup`.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlencode

import redis
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import Max, Min, Q
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals import selectors
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from approvals.states import ApprovalState
from bench import workers
from bench.env import BROKER_URL
from bench.replies import FAMILY, MODEL, lookup_script, refund_script
from bench.report import percentile
from bench.tools import BARE_TOOLS, TOOL
from config.heap import startup_objects_freeze
from toolcalls.actors import Actor
from toolcalls.api.auth import api_key_create
from toolcalls.api.views import cursor_sign
from toolcalls.demo.models import Order
from toolcalls.demo.services import CUSTOMER_REF, demo_seed
from toolcalls.keyset import cursor_after
from toolcalls.models import AuditEvent, ModelTurn, Operation, ReplayScript, Tenant, ToolCall
from toolcalls.selectors import NEWEST_FIRST
from toolcalls.services import approvals as engine_approvals
from toolcalls.services import execution, turns
from toolcalls.services.catalogue import tenant_tools_enable
from toolcalls.services.enqueue import continuing
from toolcalls.services.operations import operation_start
from toolcalls.services.watching import operation_watch
from toolcalls.states import OPERATION_TERMINAL, CallState, OperationState

Figures = dict[str, float | None]
_STARTED = time.monotonic()
#: States an operation of the bench ends in; ESCALATED means a guard tripped (a bench bug).
_DONE = frozenset({*OPERATION_TERMINAL, OperationState.ESCALATED})
#: How often this process would look at an operation it waits for if nothing told it of a
#: change (the bench runs with Redis, which does: ``operation_watch``).
_POLL_S = 0.005
#: Statements a turn does not count: transaction control.
_CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})


def say(message: str) -> None:
    """One progress line, with the seconds since the bench started."""
    print(f"[{time.monotonic() - _STARTED:7.1f} s] {message}", flush=True)


@dataclass(frozen=True)
class Sizes:
    """How much work each phase does (``BENCH_QUICK`` picks the small set)."""

    baseline_operations: int
    latency_operations: int
    refund_operations: int
    throughput_operations_1w: int
    throughput_operations_2w: int
    queue_pending: tuple[int, int]
    queue_decided: int
    queue_samples: int
    turns_per_operation: int = 6
    throughput_turns_per_operation: int = 10


FULL = Sizes(
    baseline_operations=100,
    latency_operations=100,
    refund_operations=50,
    throughput_operations_1w=1000,
    throughput_operations_2w=300,
    queue_pending=(1_000, 100_000),
    queue_decided=1_000_000,
    queue_samples=200,
)
QUICK = Sizes(
    baseline_operations=10,
    latency_operations=10,
    refund_operations=6,
    throughput_operations_1w=30,
    throughput_operations_2w=20,
    queue_pending=(1_000, 10_000),
    queue_decided=100_000,
    queue_samples=80,
)


# --- Set-up -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class World:
    tenant: Tenant
    requester: Any
    operator: Any


def world_create() -> World:
    """Migrate the fresh database, seed the demo tenant and users (the bench's tool in the
    tenant's catalogue), empty the broker database."""
    call_command("migrate", verbosity=0)
    seed = demo_seed()
    tools = [TOOL, *BARE_TOOLS.values()]
    tenant_tools_enable(tenant=seed.tenant, tool_names=tools, actor=Actor.system("bench"))
    broker_flush()
    workers.timings_reset()
    users = get_user_model().objects
    return World(
        tenant=seed.tenant,
        requester=users.get(username="requester"),
        operator=users.get(username="operator"),
    )


def broker_flush() -> None:
    """Drop every message in the bench's Redis database (wake-ups nobody should run)."""
    redis.Redis.from_url(BROKER_URL).flushdb()


def _lookup_operation(
    world: World, script: ReplayScript, *, budgets: dict[str, int] | None = None
) -> Operation:
    return _operation(world, script, "Look these up, please.", [TOOL], budgets=budgets)


def _operation(
    world: World,
    script: ReplayScript,
    input_text: str,
    tool_names: list[str],
    *,
    budgets: dict[str, int] | None = None,
) -> Operation:
    """An operation of the demo customer's, started by the requester, its replies ``script``."""
    return operation_start(
        tenant=world.tenant,
        requested_by=world.requester,
        subject_ref=CUSTOMER_REF,
        family=FAMILY,
        model=MODEL,
        input_text=input_text,
        tool_names=tool_names,
        replay_script=script,
        budgets=budgets,
    )


def _script(turns_per_operation: int) -> ReplayScript:
    return ReplayScript.objects.create(
        name=f"bench {turns_per_operation} turns",
        family=FAMILY,
        model=MODEL,
        replies=lookup_script(turns_per_operation),
    )


def _state(operation_pk: int) -> str:
    return Operation.objects.values_list("state", flat=True).get(pk=operation_pk)


def _wait_state(operation_pk: int, states: Iterable[str], *, timeout_s: float = 60) -> str:
    """Wait until the operation is in one of ``states`` (or done), as a client that follows it
    does: told when a step of it commits (``operation_watch``), reading its state then, with no
    poll interval in between."""
    wanted = frozenset(states)
    deadline = time.monotonic() + timeout_s
    with operation_watch(operation_pk=operation_pk, poll_s=_POLL_S) as wait:
        while (left := deadline - time.monotonic()) > 0:
            state = _state(operation_pk)
            if state in wanted or state in _DONE:
                return state
            wait(left)
    raise RuntimeError(f"operation {operation_pk} did not reach {sorted(wanted)} in {timeout_s} s")


# --- In-process baseline and queries per turn ---------------------------------------------------


def _drive_in_process(operation: Operation) -> None:
    """Run ``operation`` to its end in this process, a step at a time: each model turn through
    ``turns.turn_run``, each ready call through ``execution.call_execute``; the wake-ups they
    send go to Redis, unread (:func:`broker_flush` drops them)."""
    while True:
        turns.turn_run(operation_pk=operation.pk)
        if _state(operation.pk) in _DONE:
            return
        ready = ToolCall.objects.filter(operation=operation, state=CallState.PROPOSED)
        for call_pk in ready.values_list("pk", flat=True):
            execution.call_execute(call_pk=call_pk)


def _drive_continuing(operation: Operation, on_turn: Callable[[Callable[[], None]], None]) -> None:
    """Run ``operation`` to its end as a worker runs an operation it continues with
    (``enqueue.continuing``): the first turn, then each step the one before woke or claimed, in
    this process, with no broker in between; each model turn through ``on_turn`` (the first
    through ``turns.turn_run``, the others through ``turns.turn_continue``, once the step before
    claimed them)."""
    real_run, real_continue = turns.turn_run, turns.turn_continue
    inside: list[bool] = []  # a turn_continue inside a turn_run is part of that turn

    def one_turn(run: Callable[[], None]) -> None:
        if inside:
            run()
            return
        inside.append(True)
        try:
            on_turn(run)
        finally:
            inside.clear()

    def turn_run(**kwargs: Any) -> None:
        one_turn(lambda: real_run(**kwargs))

    def turn_continue(claim: Any) -> None:
        one_turn(lambda: real_continue(claim))

    turns.turn_run, turns.turn_continue = turn_run, turn_continue  # what the steps call
    try:
        with continuing():
            turns.turn_run(operation_pk=operation.pk)
    finally:
        turns.turn_run, turns.turn_continue = real_run, real_continue
    state = _state(operation.pk)
    if state != OperationState.COMPLETED:
        raise RuntimeError(f"{operation.public_id} ended {state}")


def baseline(world: World, sizes: Sizes) -> Figures:
    """The same scripted turns as through Celery, run in this process as a worker runs an
    operation it continues with: a durable loop that checkpoints every step to PostgreSQL, in
    one long-lived process, each step's wake-up running the next step at once instead of going
    through the broker (the peer has no broker either). Each model turn is timed (its claim,
    unless the step before claimed it, its request and its record), the calls between turns are
    not; ``baseline_cycle_ms_p50`` is each operation's whole time, start to end, over its
    turns, calls included (as the peer's time per turn is its operation's).

    The first operation warms up and is not timed; the statements are counted in a separate
    pass, so the timed runs carry no capture overhead.
    """
    script = _script(sizes.turns_per_operation)
    times: list[float] = []
    cycles: list[float] = []

    def timed(run: Callable[[], None]) -> None:
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)

    _drive_continuing(_lookup_operation(world, script), lambda run: run())
    for number in range(sizes.baseline_operations):
        started = time.perf_counter()
        _drive_continuing(_lookup_operation(world, script), timed)
        cycles.append((time.perf_counter() - started) * 1000 / sizes.turns_per_operation)
        if (number + 1) % 20 == 0:
            say(f"baseline: {number + 1}/{sizes.baseline_operations} operations")
    counts, totals = _statements(world, script)
    broker_flush()  # the wake-ups each operation's start sent
    say(f"baseline: {len(times)} turns; statements per turn {counts[: sizes.turns_per_operation]}")
    return {
        "baseline_turn_ms_p50": percentile(times, 50),
        "baseline_cycle_ms_p50": percentile(cycles, 50),
        "queries_per_turn": sum(counts) / len(counts),
        "queries_per_cycle": sum(totals) / (len(totals) * sizes.turns_per_operation),
    }


def _statements(world: World, script: ReplayScript) -> tuple[list[int], list[int]]:
    """Statements (BEGIN/COMMIT/ROLLBACK not counted) of each model turn, and of each whole
    operation (its start and calls included), over three operations."""
    counts: list[int] = []

    def counted(run: Callable[[], None]) -> None:
        counts.append(_counted(run))

    totals = [
        _counted(lambda: _drive_continuing(_lookup_operation(world, script), counted))
        for _ in range(3)
    ]
    return counts, totals


def _counted(run: Callable[[], None]) -> int:
    """Statements ``run`` sends (those inside a nested count are counted there too)."""
    with CaptureQueriesContext(connection) as captured:
        run()
    sql = (query["sql"].strip().upper() for query in captured.captured_queries)
    return sum(1 for statement in sql if statement not in _CONTROL)


# --- Storage per operation ---------------------------------------------------------------------

#: Model turns per operation the storage phase runs, and the padding of each call's result
#: (bytes): a long-running agent whose every tool returns a page of data.
STORAGE_TURNS = (4, 16, 64)
STORAGE_RESULT_BYTES = 5000
_STORED_BYTES = """
    select coalesce(sum(pg_column_size(t.request_frame) + pg_column_size(t.request_items)
                        + coalesce(pg_column_size(t.reply), 0)), 0)
         + (select coalesce(sum(coalesce(pg_column_size(c.arguments), 0)
                              + coalesce(pg_column_size(c.model_result), 0)), 0)
              from toolcalls_toolcall c where c.operation_id = %(pk)s)
         + (select pg_column_size(o.conversation) from toolcalls_operation o where o.id = %(pk)s)
      from toolcalls_modelturn t where t.operation_id = %(pk)s
"""


def storage(world: World) -> Figures:
    """Bytes one operation stores for its model traffic, at each of :data:`STORAGE_TURNS`
    turns, every call returning :data:`STORAGE_RESULT_BYTES` of padding: each turn's request
    body and reply, each call's arguments and result, and the operation's conversation, as
    PostgreSQL stores them (``pg_column_size``, after compression). Run in this process; the
    work grows linearly with the turns, so should the bytes."""
    figures: Figures = {}
    for count in STORAGE_TURNS:
        script = ReplayScript.objects.create(
            name=f"bench storage {count} turns",
            family=FAMILY,
            model=MODEL,
            replies=lookup_script(count, result_bytes=STORAGE_RESULT_BYTES),
        )
        limits = {"max_turns": count, "max_tool_calls": count, "max_calls_per_tool": count}
        operation = _lookup_operation(world, script, budgets=limits)
        _drive_in_process(operation)
        if _state(operation.pk) != OperationState.COMPLETED:
            raise RuntimeError(f"{operation.public_id} ended {_state(operation.pk)}")
        with connection.cursor() as cursor:
            cursor.execute(_STORED_BYTES, {"pk": operation.pk})
            figures[f"bytes_per_op_{count}"] = float(cursor.fetchone()[0])
        say(f"storage: {count} turns store {figures[f'bytes_per_op_{count}']:,.0f} bytes")
    broker_flush()
    return figures


# --- Through Celery: latency --------------------------------------------------------------------


def turn_latency(world: World, sizes: Sizes) -> Figures:
    """Operations one at a time through one worker: each turn's control-plane time as the worker
    measured it around the engine's step (``bench.tools``: the claim unless the step before
    claimed the turn, the model request and the record, with their commits and wake-ups, never
    the time a wake-up waited in the queue). One operation warms the worker up first."""
    script = _script(sizes.turns_per_operation)
    operation = _lookup_operation(world, script)
    _wait_state(operation.pk, _DONE)
    time.sleep(0.5)  # the worker writes a task's time after its commit: let the last one land
    marks = workers.timing_marks()
    pks = []
    for number in range(sizes.latency_operations):
        operation = _lookup_operation(world, script)
        pks.append(operation.pk)
        state = _wait_state(operation.pk, _DONE)  # timed inside the worker
        if state != OperationState.COMPLETED:
            raise RuntimeError(f"{operation.public_id} ended {state}")
        if (number + 1) % 20 == 0:
            say(f"turn latency: {number + 1}/{sizes.latency_operations} operations")
    recorded = ModelTurn.objects.filter(operation_id__in=pks).count()
    deadline = time.monotonic() + 5
    tasks = workers.timings_since(marks)
    while len(tasks.get("toolcalls.run_turn", [])) < recorded and time.monotonic() < deadline:
        time.sleep(0.1)
        tasks = workers.timings_since(marks)
    times = tasks.get("toolcalls.run_turn", [])
    say(f"turn latency: {len(times)} runs of run_turn timed for {recorded} recorded turns")
    for name, runs in sorted(tasks.items()):
        say(
            f"  worker time per turn in {name}: {sum(runs) / recorded:.1f} ms "
            f"({len(runs) / recorded:.1f} tasks, p50 {percentile(runs, 50):.1f} ms)"
        )
    return {"turn_ms_p50": percentile(times, 50), "turn_ms_p99": percentile(times, 99)}


#: The refund's figures (``refund_<part>_ms_p50``): the whole, and its three parts.
_REFUND_PARTS = ("op", "parked", "decide", "finish")


def refund(world: World, sizes: Sizes) -> Figures:
    """The bundled refund scenario end to end, one at a time: start → parked → approved with
    ``approval_decide`` as soon as it parks → COMPLETED. Each refund has its own order, so none
    is answered from another's idempotency record. Beside the whole (``refund_op_ms_p50``), its
    three parts: start to parked (three model turns, two calls), the decision in this process,
    and the decision's commit to COMPLETED (the resume, the refund's call and the last turn).

    Resume latency comes from the audit trail: the decision event's time to the call's
    APPROVED → EXECUTING event (both stamped inside their transactions, so the decision's commit
    and the wake-up's trip through Redis fall inside the interval).
    """
    parts, approvals = _refunds(world, sizes, first_order=900000)
    resumes = [_resume_ms(approval) for approval in approvals]
    return {
        **{f"refund_{name}_ms_p50": percentile(values, 50) for name, values in parts.items()},
        "resume_ms_p50": percentile(resumes, 50),
        "resume_ms_p99": percentile(resumes, 99),
    }


def refund_bare(world: World, sizes: Sizes) -> Figures:
    """The refunds of :func:`refund`, start to COMPLETED (``refund_bare_op_ms_p50``), with the
    reference runtime's tools (:data:`bench.tools.BARE_TOOLS`: each answers at once, no shop
    behind it): the engine's share of a refund, what the reference runtime is compared on."""
    parts, _approvals = _refunds(world, sizes, first_order=950000, tools=BARE_TOOLS)
    return {"refund_bare_op_ms_p50": percentile(parts["op"], 50)}


def _refunds(
    world: World, sizes: Sizes, *, first_order: int, tools: Mapping[str, str] | None = None
) -> tuple[dict[str, list[float]], list[ApprovalRequest]]:
    """``sizes.refund_operations`` refunds one at a time, each approved as soon as it parks:
    each part's times in ms (:data:`_REFUND_PARTS`) and the approvals decided."""
    parts: dict[str, list[float]] = {name: [] for name in _REFUND_PARTS}
    approvals: list[ApprovalRequest] = []
    for number in range(sizes.refund_operations):
        order_id = f"ORD-{first_order + number}"
        script = _refund_script(world, order_id, tools=tools)
        started = time.perf_counter()
        operation = _refund_start(world, script, order_id, tools=tools)
        state = _wait_state(operation.pk, {OperationState.WAITING_APPROVAL})
        if state != OperationState.WAITING_APPROVAL:
            raise RuntimeError(f"refund {operation.public_id} ended {state} before its approval")
        parked = time.perf_counter()
        approval = ApprovalRequest.objects.get(operation=operation, state=ApprovalState.PENDING)
        approval_decide(approval_pk=approval.pk, actor=world.operator, approve=True)
        decided = time.perf_counter()
        state = _wait_state(operation.pk, _DONE)
        done = time.perf_counter()
        if state != OperationState.COMPLETED:
            raise RuntimeError(f"refund {operation.public_id} ended {state}")
        spans = {"op": (started, done), "parked": (started, parked)}
        spans |= {"decide": (parked, decided), "finish": (decided, done)}
        for name, (begin, end) in spans.items():
            parts[name].append((end - begin) * 1000)
        approvals.append(approval)
        if (number + 1) % 10 == 0:
            kind = "refund with the reference's tools" if tools else "refund"
            say(f"{kind}: {number + 1}/{sizes.refund_operations} operations")
    return parts, approvals


def _refund_script(
    world: World, order_id: str, *, tools: Mapping[str, str] | None = None
) -> ReplayScript:
    """A new order ``order_id`` of the demo customer, and the refund scenario's script for it
    (each refund its own order: none is answered from another's idempotency record), proposing
    ``tools[name]`` for each demo tool ``tools`` names."""
    Order.objects.create(
        tenant_ref=world.tenant.slug,
        order_id=order_id,
        customer_ref=CUSTOMER_REF,
        description="Noise-cancelling headphones",
        total_cents=12999,
    )
    return ReplayScript.objects.create(
        name="bench refund",
        family=FAMILY,
        model=MODEL,
        replies=refund_script(order_id, tools=tools),
    )


def _refund_start(
    world: World, script: ReplayScript, order_id: str, *, tools: Mapping[str, str] | None = None
) -> Operation:
    text = f"Please refund $49.99 of {order_id}."
    names = ["get_order", "create_refund_draft", "submit_refund"]
    return _operation(world, script, text, [(tools or {}).get(name, name) for name in names])


def refund_statements(world: World) -> Figures:
    """The statements (transaction control not counted) one refund sends from its start to
    COMPLETED, its approval decided with ``approval_decide`` as soon as it parks, run in this
    process as the workers run it: the engine's, the approval's and those of the tools' checks
    (authorization, precondition, summary). A handler's own statements, on its thread's
    connection, are not counted. The second of two refunds is counted (the first compiles);
    call with no worker running: the wake-ups they send are dropped."""
    order_ids = [f"ORD-{800000 + number}" for number in range(2)]
    scripts = [_refund_script(world, order_id) for order_id in order_ids]
    counts = [
        _counted(partial(_refund_in_process, world, script, order_id))
        for script, order_id in zip(scripts, order_ids, strict=True)
    ]
    broker_flush()
    return {"refund_statements": counts[-1]}


def refund_in_process(world: World, sizes: Sizes) -> Figures:
    """The refund scenario run in this process as a worker continues it, its approval decided
    as soon as it parks (``baseline_refund_ms_p50``): the refund's cost without the broker,
    the worker's wake-ups and the watch between processes. Call with no worker running."""
    totals: list[float] = []
    for number in range(sizes.refund_operations):
        order_id = f"ORD-{850000 + number}"
        script = _refund_script(world, order_id)
        started = time.perf_counter()
        _refund_in_process(world, script, order_id)
        totals.append((time.perf_counter() - started) * 1000)
    broker_flush()
    return {"baseline_refund_ms_p50": percentile(totals, 50)}


def _refund_in_process(world: World, script: ReplayScript, order_id: str) -> None:
    operation = _refund_start(world, script, order_id)
    with continuing():
        turns.turn_run(operation_pk=operation.pk)
    approval = ApprovalRequest.objects.get(operation=operation, state=ApprovalState.PENDING)
    approval_decide(approval_pk=approval.pk, actor=world.operator, approve=True)
    with continuing():
        engine_approvals.call_resume(call_pk=approval.call_id)
    state = _state(operation.pk)
    if state != OperationState.COMPLETED:
        raise RuntimeError(f"refund {operation.public_id} ended {state}")


def _resume_ms(approval: ApprovalRequest) -> float:
    decided = AuditEvent.objects.get(
        approval_ref=approval.public_id,
        kind="approval.transition",
        to_state=ApprovalState.APPROVED,
    )
    executing = AuditEvent.objects.get(
        call_id=approval.call_id,
        kind="call.transition",
        from_state=CallState.APPROVED,
        to_state=CallState.EXECUTING,
    )
    return (executing.created_at - decided.created_at).total_seconds() * 1000


# --- Through Celery: throughput -----------------------------------------------------------------


def throughput_prepare(world: World, sizes: Sizes, operations: int) -> list[int]:
    """Start ``operations`` operations while no worker runs: their wake-ups wait in Redis."""
    script = _script(sizes.throughput_turns_per_operation)
    pks = []
    for number in range(operations):
        pks.append(_lookup_operation(world, script).pk)
        if (number + 1) % 250 == 0:
            say(f"throughput: {number + 1}/{operations} operations started")
    return pks


def throughput_wait(pks: list[int], label: str, *, stall_s: float = 60) -> Figures:
    """Wait until every operation of ``pks`` ended; turns per second between the first claim
    and the last completion (the workers' own timestamps in the audit trail, so neither worker
    start-up nor this process's polling counts)."""
    # Progress is any new audit event: with hundreds of operations in one FIFO queue, a minute
    # may pass between two turns while the workers run the calls and wake-ups in between.
    last_progress, last_event = time.monotonic(), _latest_event()
    next_line = time.monotonic()
    while True:
        done = Operation.objects.filter(pk__in=pks, state__in=_DONE).count()
        event = _latest_event()
        if event != last_event:
            last_progress, last_event = time.monotonic(), event
        if time.monotonic() >= next_line or done == len(pks):
            recorded = ModelTurn.objects.filter(operation_id__in=pks).count()
            say(f"{label}: {done}/{len(pks)} operations done, {recorded:,} turns")
            next_line = time.monotonic() + 10
        if done == len(pks):
            break
        if time.monotonic() - last_progress > stall_s:
            raise RuntimeError(f"{label}: nothing happened for {stall_s} s")
        time.sleep(1)
    failed = Operation.objects.filter(pk__in=pks).exclude(state=OperationState.COMPLETED).count()
    if failed:
        raise RuntimeError(f"{label}: {failed} operations did not complete")
    events = AuditEvent.objects.filter(operation_id__in=pks, kind="operation.transition")
    first = events.filter(from_state=OperationState.PENDING).order_by("created_at").first()
    last = events.filter(to_state=OperationState.COMPLETED).order_by("-created_at").first()
    assert first is not None and last is not None
    recorded = ModelTurn.objects.filter(operation_id__in=pks).count()
    elapsed_s = (last.created_at - first.created_at).total_seconds()
    spans = _spans_ms(events)
    return {
        "turns": float(recorded),
        "turns_per_s": recorded / elapsed_s if elapsed_s else None,
        "span_share_p99": (percentile(spans, 99) or 0) / (elapsed_s * 1000) if elapsed_s else None,
    }


def _spans_ms(events: Any) -> list[float]:
    """Each operation's own span (ms): its first claim to its completion."""
    spans = events.values("operation_id").annotate(
        begun=Min("created_at", filter=Q(from_state=OperationState.PENDING)),
        ended=Max("created_at", filter=Q(to_state=OperationState.COMPLETED)),
    )
    return [(row["ended"] - row["begun"]).total_seconds() * 1000 for row in spans]


def _latest_event() -> int:
    return AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


# --- The approval queue -------------------------------------------------------------------------


def queue_seed(world: World, *, pending: int, decided: int) -> None:
    """Add approvals with ``seed_approvals``, then vacuum what it wrote, as autovacuum would
    soon: measuring while autovacuum works through a million new rows measures autovacuum."""
    call_command(
        "seed_approvals",
        tenant=world.tenant.slug,
        pending=pending,
        decided=decided,
        stdout=_SayStream("seed_approvals"),
    )
    with connection.cursor() as cursor:
        for model in (Operation, ModelTurn, ToolCall, ApprovalRequest):
            cursor.execute(f"VACUUM (ANALYZE) {connection.ops.quote_name(model._meta.db_table)}")
    say("vacuumed")


class _SayStream:
    """A management command's output as progress lines."""

    def __init__(self, label: str) -> None:
        self.label = label

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                say(f"{self.label}: {line.strip()}")

    def flush(self) -> None:
        pass


def queue_measure(world: World, samples: int) -> dict[str, float | None]:
    """p99 (ms) of the pending-approval list page through the console view (logged in as an
    operator: middleware, session, header count, template) and the API (``/api/v1/approvals``,
    API key), half the samples the first page and half a page from the middle of the queue;
    and (``lists``) of the console's decisions history and operations list, first pages, pages
    from the middle and the operations waiting for approval.

    This process then serves the pages as a web process would: with what it has loaded frozen
    out of the garbage collector's walks first, as ``config.wsgi`` does at start-up."""
    startup_objects_freeze()
    pending = ApprovalRequest.objects.filter(tenant=world.tenant, state=ApprovalState.PENDING)
    waiting = pending.count()
    middle = pending.order_by("expires_at", "pk")[waiting // 2]
    console = Client(SERVER_NAME="localhost")
    console.force_login(world.operator)
    deep = urlencode({"after": cursor_after(middle, selectors.QUEUE_SORTS["expiry"])})
    console_pages = ["/console/approvals/", f"/console/approvals/?{deep}"]
    name = f"bench-{waiting}-pending"  # measured once per queue size: a key each
    _key, token = api_key_create(tenant=world.tenant, name=name, scopes=["operations:read"])
    api = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {token}")
    position = base64.b64encode(urlencode({"p": str(middle.expires_at)}).encode()).decode()
    deep_api = urlencode({"cursor": cursor_sign(path="/api/v1/approvals", encoded=position)})
    api_pages = ["/api/v1/approvals", f"/api/v1/approvals?{deep_api}"]
    decided = ApprovalRequest.objects.filter(tenant=world.tenant).exclude(
        state=ApprovalState.PENDING
    )
    deep_decided = decided.order_by("-decided_at", "-pk")[decided.count() // 2]
    operations = Operation.objects.filter(tenant=world.tenant)
    deep_operation = operations.order_by("-created_at", "-pk")[operations.count() // 2]
    lists_pages = [
        "/console/approvals/decided/",
        "/console/approvals/decided/?"
        + urlencode({"after": cursor_after(deep_decided, selectors.DECIDED_ORDER)}),
        "/console/operations/",
        "/console/operations/?" + urlencode({"after": cursor_after(deep_operation, NEWEST_FIRST)}),
        "/console/operations/?state=WAITING_APPROVAL",
    ]
    found: dict[str, float | None] = {}
    samples_of = (
        ("console", console, console_pages),
        ("api", api, api_pages),
        ("lists", console, lists_pages),
    )
    for label, client, pages in samples_of:
        times = _sample(client, pages, samples)
        found[label] = percentile(times, 99)
        say(f"  {label}: p50 {percentile(times, 50):.1f} ms, p99 {found[label]:.1f} ms")
    return found


def _sample(client: Client, pages: list[str], samples: int) -> list[float]:
    for page in pages:  # warm-up: the first request of a kind compiles and caches things
        for _ in range(10):
            _get(client, page)
    times = []
    for number in range(samples):
        page = pages[number % len(pages)]
        started = time.perf_counter()
        _get(client, page)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _get(client: Client, page: str) -> None:
    response = client.get(page)
    if response.status_code != 200:
        raise RuntimeError(f"GET {page}: {response.status_code} {response.content[:300]!r}")
