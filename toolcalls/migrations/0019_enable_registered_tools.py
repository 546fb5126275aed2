"""Tenants that existed before tool catalogues keep every tool they could use: each gets a
catalogue row, without overrides, for every tool registered when this migration runs. Tenants
created later start with an empty catalogue."""

from django.db import migrations


def enable_registered_tools(apps, schema_editor):  # type: ignore[no-untyped-def]
    from toolcalls import registry

    tenant_model = apps.get_model("toolcalls", "Tenant")
    tenant_tool = apps.get_model("toolcalls", "TenantTool")
    rows = [
        tenant_tool(tenant_id=pk, tool_name=name, updated_by="migration")
        for pk in tenant_model.objects.values_list("pk", flat=True)
        for name in registry.names()
    ]
    tenant_tool.objects.bulk_create(rows, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [("toolcalls", "0018_tenant_tool_catalogue")]

    operations = [migrations.RunPython(enable_registered_tools, migrations.RunPython.noop)]
