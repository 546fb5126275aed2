# A settled call keeps the tool and policy revisions its result is bound to. Rows settled before
# keep null: their binding is checked against the registry, as it was computed.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("toolcalls", "0014_tool_risk_permissions"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="tool_revisions",
            field=models.JSONField(
                blank=True,
                help_text="Tool revisions and schema version when it settled.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="toolcall",
            name="policy_revision",
            field=models.CharField(blank=True, max_length=80),
        ),
    ]
