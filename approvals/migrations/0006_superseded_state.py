"""Approvals get a stored SUPERSEDED state: the operation ended while the approval could still be
decided. The engine records it in the step that ends the operation (with its audit event); this
migration records the approvals that were superseded before it, when the state was derived.

Each PENDING approval of an ended operation that had not expired when the operation ended
becomes SUPERSEDED, ``decided_at`` the time the operation ended: that of its
``operation.transition`` audit event into its final state, else (no such event) the operation's
``updated_at``. One that had expired first is left PENDING: the expiry sweep records it EXPIRED,
as the engine leaves such an approval now.

No audit event is written for these rows. An operation's events are one hash chain, ordered and
timed as things happened; an event appended now would stand after the operation's end, at the
time of the migration rather than of the supersession. The chains stay as they were and still
verify (``manage.py audit_verify`` checks hashes, links and heads, not approval rows); the
operation's end event is the record of when the approval stopped being decidable.

Backwards, every SUPERSEDED approval becomes PENDING again without a decision time, which the
code before this migration reads as superseded (those the engine recorded since keep their
audit events, which name the SUPERSEDED state).
"""

from django.db import migrations, models
from django.db.models import OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

#: The operations' final states (toolcalls.states.OPERATION_TERMINAL when this was written).
ENDED = ("COMPLETED", "REFUSED", "INCOMPLETE", "FAILED", "STOPPED", "CANCELLED")


def supersede_pending_of_ended(apps, schema_editor):  # type: ignore[no-untyped-def]
    approval_model = apps.get_model("approvals", "ApprovalRequest")
    event_model = apps.get_model("toolcalls", "AuditEvent")
    operation_model = apps.get_model("toolcalls", "Operation")
    end_event = event_model.objects.filter(
        operation_id=OuterRef("operation_id"), kind="operation.transition", to_state__in=ENDED
    ).order_by("seq")
    updated = operation_model.objects.filter(pk=OuterRef("operation_id"))
    ended_at = Coalesce(
        Subquery(end_event.values("created_at")[:1]), Subquery(updated.values("updated_at")[:1])
    )
    still_decidable = Q(expires_at__gt=ended_at) & (
        Q(operation__deadline_at__isnull=True) | Q(operation__deadline_at__gt=ended_at)
    )
    approval_model.objects.filter(
        still_decidable, state="PENDING", operation__state__in=ENDED
    ).update(state="SUPERSEDED", decided_at=ended_at)


def pending_again(apps, schema_editor):  # type: ignore[no-untyped-def]
    approval_model = apps.get_model("approvals", "ApprovalRequest")
    approval_model.objects.filter(state="SUPERSEDED").update(state="PENDING", decided_at=None)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0005_foreign_keys_indexed_by_composites")]

    operations = [
        migrations.RemoveConstraint(model_name="approvalrequest", name="approval_state_valid"),
        migrations.AlterField(
            model_name="approvalrequest",
            name="state",
            field=models.CharField(
                choices=[
                    ("PENDING", "Pending"),
                    ("APPROVED", "Approved"),
                    ("DENIED", "Denied"),
                    ("EXPIRED", "Expired"),
                    ("SUPERSEDED", "Superseded"),
                ],
                default="PENDING",
                max_length=20,
            ),
        ),
        migrations.AddConstraint(
            model_name="approvalrequest",
            constraint=models.CheckConstraint(
                condition=Q(state__in=["PENDING", "APPROVED", "DENIED", "EXPIRED", "SUPERSEDED"]),
                name="approval_state_valid",
            ),
        ),
        migrations.RunPython(supersede_pending_of_ended, pending_again),
    ]
