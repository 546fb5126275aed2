"""``manage.py seed_approvals``: bulk-insert pending and decided approvals for load tests.

Each approval comes with the rows it hangs off: its operation, the model turn that proposed the
call, and the call. Rows are streamed with PostgreSQL ``COPY`` in batches, one transaction per
batch, with IDs reserved from the tables' sequences first so the rows can reference each other.
Column values start from each model's own defaults, so columns added later need no change here.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser
from django.core.validators import validate_slug
from django.db import connection, models, transaction
from django.utils import timezone

from approvals.models import ApprovalRequest
from approvals.states import ApprovalState
from toolcalls import registry
from toolcalls.binding import canonical_json
from toolcalls.guards import budgets_for
from toolcalls.ids import new_approval_id, new_call_id, new_operation_id
from toolcalls.management.base import CallgateCommand
from toolcalls.models import ModelTurn, Operation, Tenant, ToolCall
from toolcalls.states import CallState, OperationState

FAMILY = "openai_responses"
MODEL = "gpt-5.1-seeded"
#: Decided approvals cycle through these, with the state their call ended in.
_DECIDED = (
    (ApprovalState.APPROVED, CallState.SUCCEEDED),
    (ApprovalState.DENIED, CallState.DENIED),
    (ApprovalState.EXPIRED, CallState.EXPIRED),
)


@dataclass
class _Table:
    """One model's ``COPY`` column list and a row of its defaults, ready for the database."""

    model: type[models.Model]
    columns: list[str]
    defaults: list[Any]

    @classmethod
    def of(cls, model_class: type[models.Model], /, **values: Any) -> _Table:
        prototype = model_class(**values)
        fields = model_class._meta.concrete_fields
        return cls(
            model=model_class,
            columns=[str(field.column) for field in fields],
            defaults=[
                field.get_db_prep_save(getattr(prototype, field.attname), connection)
                for field in fields
            ],
        )

    def row(self, **values: Any) -> list[Any]:
        """The defaults with ``values`` (by column name) replaced."""
        row = list(self.defaults)
        for column, value in values.items():
            row[self.positions[column]] = value
        return row

    @cached_property
    def positions(self) -> dict[str, int]:
        return {column: position for position, column in enumerate(self.columns)}

    def copy(self, rows: Sequence[list[Any]]) -> None:
        table = connection.ops.quote_name(self.model._meta.db_table)
        names = ", ".join(connection.ops.quote_name(column) for column in self.columns)
        with (
            connection.cursor() as cursor,
            cursor.copy(f"COPY {table} ({names}) FROM STDIN") as out,
        ):
            for row in rows:
                out.write_row(row)


def _reserve(model: type[models.Model], count: int) -> list[int]:
    """``count`` new primary keys from the table's sequence (identity or serial column)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [model._meta.db_table, count],
        )
        return [pk for (pk,) in cursor.fetchall()]


class Command(CallgateCommand):
    help = (
        "Bulk-insert approvals for load tests (PostgreSQL only): --pending N approvals waiting "
        "in the queue (their operations WAITING_APPROVAL) and --decided M already decided "
        "(approved, denied or expired in turn; their operations COMPLETED), each with its "
        "operation, model turn and call, for the tenant --tenant. Rows are written with COPY in "
        "batches of --batch-size approvals (one transaction and one progress line each), then "
        "the tables are analyzed so the planner sees their new size. Pending approvals expire "
        "between 10%% and 100%% of --ttl-s from now; decided ones were created up to 90 days ago."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--tenant", default="acme", help="tenant slug (created when missing; default acme)"
        )
        parser.add_argument(
            "--pending", type=int, default=1000, help="pending approvals to add (default 1000)"
        )
        parser.add_argument(
            "--decided", type=int, default=0, help="decided approvals to add (default 0)"
        )
        parser.add_argument(
            "--pending-per-operation",
            type=int,
            default=1,
            help="pending approvals sharing one operation and model reply (default 1)",
        )
        parser.add_argument(
            "--decided-per-operation",
            type=int,
            default=10,
            help="decided approvals sharing one operation and model reply (default 10)",
        )
        parser.add_argument(
            "--requested-by",
            default="requester",
            help="username of the requester of every approval (must exist; default requester)",
        )
        parser.add_argument(
            "--decided-by",
            default="operator",
            help="username of the decider of approved and denied ones (must exist when "
            "--decided is set; default operator)",
        )
        parser.add_argument(
            "--tool",
            default="submit_refund",
            help="tool name of the calls (its registered risk and revisions are used when it "
            "is registered; default submit_refund)",
        )
        parser.add_argument(
            "--ttl-s",
            type=int,
            default=None,
            help="seconds an approval stays decidable (default CALLGATE_APPROVAL_TTL_S)",
        )
        parser.add_argument(
            "--batch-size", type=int, default=50_000, help="approvals per COPY batch"
        )
        parser.add_argument(
            "--random-seed", type=int, default=0, help="seed for expiry times and amounts"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("seed_approvals writes with COPY: it needs PostgreSQL")
        for name in ("pending", "decided"):
            if options[name] < 0:
                raise CommandError(f"--{name} cannot be negative")
        for name in ("pending_per_operation", "decided_per_operation", "batch_size"):
            if options[name] < 1:
                raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
        slug = options["tenant"]
        try:
            validate_slug(slug)
        except ValidationError:
            message = f"--tenant {slug!r}: a tenant slug (letters, digits, - and _)"
            raise CommandError(message) from None
        # The users first: a refusal creates no tenant.
        requested_by = self._user(options["requested_by"])
        decided_by = self._user(options["decided_by"]) if options["decided"] else None
        seeder = _Seeder(
            tenant=Tenant.objects.get_or_create(slug=slug, defaults={"name": slug})[0],
            requested_by=requested_by,
            decided_by=decided_by,
            tool=options["tool"],
            ttl=timedelta(seconds=options["ttl_s"] or settings.CALLGATE_APPROVAL_TTL_S),
            rng=random.Random(options["random_seed"]),
        )
        started = time.monotonic()
        plans = [
            ("pending", options["pending"], options["pending_per_operation"]),
            ("decided", options["decided"], options["decided_per_operation"]),
        ]
        for kind, total, per_operation in plans:
            done = 0
            for size in _batches(total, options["batch_size"], per_operation):
                with transaction.atomic():
                    seeder.batch(pending=kind == "pending", size=size, per_operation=per_operation)
                done += size
                self.stdout.write(
                    f"{kind}: {done:,}/{total:,} approvals ({time.monotonic() - started:.1f} s)"
                )
        with connection.cursor() as cursor:
            for model in (Operation, ModelTurn, ToolCall, ApprovalRequest):
                cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
        self.stdout.write(
            f"Seeded {options['pending']:,} pending and {options['decided']:,} decided approvals "
            f"for {seeder.tenant.slug} in {time.monotonic() - started:.1f} s."
        )

    def _user(self, username: str) -> Any:
        try:
            return get_user_model().objects.get(username=username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"no user {username!r}") from None


def _batches(total: int, batch_size: int, per_operation: int) -> Iterator[int]:
    """Batch sizes adding up to ``total``, each a multiple of ``per_operation`` but the last."""
    step = max(batch_size // per_operation, 1) * per_operation
    for start in range(0, total, step):
        yield min(step, total - start)


class _Seeder:
    def __init__(
        self,
        *,
        tenant: Tenant,
        requested_by: Any,
        decided_by: Any,
        tool: str,
        ttl: timedelta,
        rng: random.Random,
    ) -> None:
        self.tenant = tenant
        self.requested_by = requested_by
        self.decided_by = decided_by
        self.tool = tool
        self.ttl = ttl
        self.rng = rng
        spec = registry.get(tool)
        self.risk = spec.risk if spec else "irreversible"
        self.schema_version = spec.schema_version if spec else f"{tool}-v1"
        self.policy_revision = spec.approval.revision if spec else "always-v1"
        self.tables = self._tables()

    def _tables(self) -> dict[str, _Table]:
        now = timezone.now()
        return {
            "operation": _Table.of(
                Operation,
                tenant=self.tenant,
                requested_by=self.requested_by,
                subject_ref="cus_seeded",
                family=FAMILY,
                model=MODEL,
                input_text="Seeded for a load test.",
                tool_names=[self.tool],
                budgets=budgets_for(),
                conversation=[],
                turn_count=1,
                input_tokens=100,
                output_tokens=20,
                created_at=now,
                updated_at=now,
            ),
            "turn": _Table.of(
                ModelTurn,
                index=0,
                outcome="TOOL_PROPOSALS",
                request_frame={},
                input_tokens=100,
                output_tokens=20,
                provider="openai",
                family=FAMILY,
                model=MODEL,
                adapter_revision="seeded",
                transport="replay",
                created_at=now,
            ),
            "call": _Table.of(
                ToolCall, tool_name=self.tool, schema_version=self.schema_version, attempt=0
            ),
            "approval": _Table.of(
                ApprovalRequest,
                tenant=self.tenant,
                tool_name=self.tool,
                risk=self.risk,
                schema_version=self.schema_version,
                policy_revision=self.policy_revision,
                reason="Seeded: irreversible, above the approval threshold.",
                requested_by=self.requested_by,
                created_at=now,
                expires_at=now,
            ),
        }

    def batch(self, *, pending: bool, size: int, per_operation: int) -> None:
        """Write ``size`` approvals (``per_operation`` to an operation) in the open transaction."""
        operations = -(-size // per_operation)
        operation_ids = _reserve(Operation, operations)
        turn_ids = _reserve(ModelTurn, operations)
        call_ids = _reserve(ToolCall, size)
        approval_ids = _reserve(ApprovalRequest, size)
        now = timezone.now()
        rows: dict[str, list[list[Any]]] = {name: [] for name in self.tables}
        for number, (operation_id, turn_id) in enumerate(zip(operation_ids, turn_ids, strict=True)):
            created = self._created(now, pending)
            first = number * per_operation
            batch = list(range(first, min(first + per_operation, size)))
            rows["operation"].append(self._operation(operation_id, created, pending, len(batch)))
            rows["turn"].append(
                self.tables["turn"].row(
                    id=turn_id,
                    operation_id=operation_id,
                    response_id=f"resp_seeded_{operation_id}",
                    created_at=created,
                )
            )
            for position, index in enumerate(batch):
                call, approval = self._call_and_approval(
                    call_id=call_ids[index],
                    approval_id=approval_ids[index],
                    operation_id=operation_id,
                    turn_id=turn_id,
                    position=position,
                    created=created,
                    decided=None if pending else _DECIDED[index % len(_DECIDED)],
                )
                rows["call"].append(call)
                rows["approval"].append(approval)
        for name in ("operation", "turn", "call", "approval"):
            self.tables[name].copy(rows[name])

    def _created(self, now: datetime, pending: bool) -> datetime:
        if pending:
            # Expiring between 10 % and 100 % of the TTL from now.
            return now - self.ttl * self.rng.uniform(0.0, 0.9)
        return now - timedelta(days=self.rng.uniform(1, 90))

    def _operation(self, operation_id: int, created: datetime, pending: bool, calls: int) -> list:
        return self.tables["operation"].row(
            id=operation_id,
            public_id=new_operation_id(),
            state=OperationState.WAITING_APPROVAL if pending else OperationState.COMPLETED,
            final_text="" if pending else "Seeded: done.",
            tool_call_count=calls,
            calls_per_tool=json.dumps({self.tool: calls}),
            deadline_at=created + timedelta(days=1),
            created_at=created,
            updated_at=created,
        )

    def _call_and_approval(
        self,
        *,
        call_id: int,
        approval_id: int,
        operation_id: int,
        turn_id: int,
        position: int,
        created: datetime,
        decided: tuple[str, str] | None,
    ) -> tuple[list[Any], list[Any]]:
        order = f"ORD-{call_id:06d}"
        amount = self.rng.randrange(2501, 50000)
        arguments = {"order_id": order, "draft_id": f"RD-{order}-1", "amount_cents": amount}
        canonical = canonical_json(arguments).decode()
        sha256 = hashlib.sha256(canonical.encode()).hexdigest()  # toolcalls.binding.digest
        approval_state, call_state = decided or (ApprovalState.PENDING, CallState.WAITING_APPROVAL)
        decided_at = created + self.ttl * self.rng.uniform(0.01, 0.9) if decided else None
        if approval_state == ApprovalState.EXPIRED:
            decided_at = created + self.ttl
        decider = (
            self.decided_by.pk if decided and approval_state != ApprovalState.EXPIRED else None
        )
        call = self.tables["call"].row(
            id=call_id,
            public_id=new_call_id(),
            operation_id=operation_id,
            turn_id=turn_id,
            position=position,
            response_id=f"resp_seeded_{operation_id}",
            provider_call_id=f"call_seeded_{call_id}",
            raw_arguments=canonical,
            arguments=canonical,
            arguments_sha256=sha256,
            state=call_state,
            created_at=created,
            updated_at=decided_at or created,
        )
        approval = self.tables["approval"].row(
            id=approval_id,
            public_id=new_approval_id(),
            call_id=call_id,
            operation_id=operation_id,
            canonical_arguments=canonical,
            arguments_sha256=sha256,
            amount_cents=amount,
            created_at=created,
            expires_at=created + self.ttl,
            state=approval_state,
            decided_by_id=decider,
            decided_at=decided_at,
            decision_reason="Seeded decision." if approval_state == ApprovalState.DENIED else "",
        )
        return call, approval
