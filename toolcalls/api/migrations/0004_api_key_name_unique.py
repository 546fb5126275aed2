import unicodedata

from django.db import migrations, models
from django.db.models.functions import Lower


def _folded(name):
    return unicodedata.normalize("NFKC", name).casefold()


def names_made_unique(apps, schema_editor):
    """A key whose tenant has an older key of the same name (but for letter case or
    compatibility forms) takes its prefix after its name, ``billing (cg_1a2b3c4d5e6f)``: the
    name the audit trail shows from now on for what its service does next."""
    ApiKey = apps.get_model("api", "ApiKey")
    seen = set()
    for key in ApiKey.objects.order_by("pk").only("pk", "tenant_id", "name", "prefix"):
        if (key.tenant_id, _folded(key.name)) in seen:
            suffix = f" (cg_{key.prefix})"
            key.name = key.name[: 100 - len(suffix)] + suffix
            key.save(update_fields=["name"])
        seen.add((key.tenant_id, _folded(key.name)))


class Migration(migrations.Migration):

    dependencies = [
        ("api", "0003_webhooks_move_out"),
    ]

    operations = [
        migrations.RunPython(names_made_unique, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="apikey",
            constraint=models.UniqueConstraint(
                models.F("tenant"), Lower("name"), name="api_key_name_unique"
            ),
        ),
    ]
