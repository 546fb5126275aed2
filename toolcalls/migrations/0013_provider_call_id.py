# The provider's call ID is provider_call_id (Callgate's own call ID is public_id, tc_…).

from django.db import migrations, models

_RENAMES = [
    migrations.RenameField(
        model_name="toolcall", old_name="call_id", new_name="provider_call_id"
    ),
    migrations.RenameField(
        model_name="toolcall",
        old_name="call_id_synthesized",
        new_name="provider_call_id_synthesized",
    ),
]


class Migration(migrations.Migration):
    dependencies = [
        ("toolcalls", "0012_auditevent_refuse_truncate"),
    ]

    # Renaming the columns keeps their index and unique constraint in the database; only
    # Django's idea of which fields they cover is redefined (no rebuild of a large table).
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=_RENAMES,
            state_operations=[
                migrations.RemoveConstraint(model_name="toolcall", name="call_unique_per_response"),
                migrations.RemoveIndex(model_name="toolcall", name="call_provider_id"),
                *_RENAMES,
                migrations.AddIndex(
                    model_name="toolcall",
                    index=models.Index(fields=["provider_call_id"], name="call_provider_id"),
                ),
                migrations.AddConstraint(
                    model_name="toolcall",
                    constraint=models.UniqueConstraint(
                        fields=("operation", "response_id", "provider_call_id"),
                        name="call_unique_per_response",
                    ),
                ),
            ],
        ),
    ]
