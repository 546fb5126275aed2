"""Set ``Tenant.webhooks_active`` for tenants that already have an active endpoint."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def webhooks_active_fill(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    tenants = apps.get_model("toolcalls", "Tenant")
    endpoints = apps.get_model("api", "WebhookEndpoint")
    active = endpoints.objects.filter(is_active=True).values("tenant_id")
    tenants.objects.filter(pk__in=active).update(webhooks_active=True)


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_initial"),
        ("toolcalls", "0010_tenant_webhooks_active"),
    ]

    operations = [
        migrations.RunPython(webhooks_active_fill, migrations.RunPython.noop),
    ]
