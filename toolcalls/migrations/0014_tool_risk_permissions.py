# The permissions a requester needs for write and irreversible tools to run for them. Until now
# every member of a tenant could have every tool run, so every existing member keeps that right.

from django.db import migrations

_CODENAMES = {
    "use_write_tools": "Can have write tools run for their operations",
    "use_irreversible_tools": "Can have irreversible tools run for their operations",
}


def grant_to_members(apps, schema_editor):  # type: ignore[no-untyped-def]
    content_type, _ = apps.get_model("contenttypes", "ContentType").objects.get_or_create(
        app_label="toolcalls", model="operation"
    )
    permission_model = apps.get_model("auth", "Permission")
    permissions = [
        permission_model.objects.get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )[0]
        for codename, name in _CODENAMES.items()
    ]
    members = apps.get_model("toolcalls", "Tenant").members.through
    user_model = apps.get_model("auth", "User")
    for user in user_model.objects.filter(pk__in=members.objects.values("user_id")):
        user.user_permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("toolcalls", "0013_provider_call_id"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="operation",
            options={
                "permissions": [
                    ("resolve_operation", "Can extend, stop or resolve escalated operations"),
                    ("use_write_tools", "Can have write tools run for their operations"),
                    (
                        "use_irreversible_tools",
                        "Can have irreversible tools run for their operations",
                    ),
                ]
            },
        ),
        migrations.RunPython(grant_to_members, migrations.RunPython.noop),
    ]
