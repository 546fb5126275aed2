"""Drafts and ledger entries name their tenant, and their IDs are unique per tenant.

Existing rows take their order's tenant; IDs already issued stay as they are (globally unique
until now, so unique per tenant too).
"""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def tenant_from_order(apps, schema_editor):
    order_tenant = Subquery(
        apps.get_model("demo", "Order").objects.filter(pk=OuterRef("order_id")).values("tenant_ref")
    )
    for name in ("RefundDraft", "LedgerEntry"):
        apps.get_model("demo", name).objects.update(tenant_ref=order_tenant)


class Migration(migrations.Migration):

    dependencies = [
        ("demo", "0002_draft_key_and_faults"),
    ]

    operations = [
        migrations.AddField(
            model_name="refunddraft",
            name="tenant_ref",
            field=models.SlugField(default=""),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="ledgerentry",
            name="tenant_ref",
            field=models.SlugField(default=""),
            preserve_default=False,
        ),
        migrations.RunPython(tenant_from_order, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="refunddraft",
            name="draft_id",
            field=models.CharField(max_length=60),
        ),
        migrations.AlterField(
            model_name="ledgerentry",
            name="refund_id",
            field=models.CharField(max_length=60),
        ),
        migrations.AddConstraint(
            model_name="refunddraft",
            constraint=models.UniqueConstraint(
                fields=("tenant_ref", "draft_id"), name="demo_draft_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="ledgerentry",
            constraint=models.UniqueConstraint(
                fields=("tenant_ref", "refund_id"), name="demo_refund_unique"
            ),
        ),
    ]
