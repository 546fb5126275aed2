"""Agent profiles and their immutable revisions; operations record the revision they ran with.

PostgreSQL refuses UPDATE and DELETE of agent revisions, whoever issues them (the ORM refuses
both already; the trigger covers raw SQL, other clients and bugs), like the audit trail's row
trigger. A no-op on other databases.
"""

import django.db.models.deletion
from django.db import migrations, models

from toolcalls.migrations._postgresql import on_postgresql


TRIGGER = "toolcalls_agentrevision_immutable"

CREATE = f"""
CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'agent revisions are immutable: % of toolcalls_agentrevision row % refused',
        TG_OP, OLD.id
        USING HINT = 'Create a new revision of the agent instead.';
END;
$$;
CREATE TRIGGER {TRIGGER}
    BEFORE UPDATE OR DELETE ON toolcalls_agentrevision
    FOR EACH ROW EXECUTE FUNCTION {TRIGGER}();
"""

DROP = f"""
DROP TRIGGER IF EXISTS {TRIGGER} ON toolcalls_agentrevision;
DROP FUNCTION IF EXISTS {TRIGGER}();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('toolcalls', '0016_operation_instructions_settings'),
    ]

    operations = [
        migrations.AlterField(
            model_name='operation',
            name='settings',
            field=models.JSONField(blank=True, default=dict, help_text='Model settings asked for (ModelSettings).'),
        ),
        migrations.AlterField(
            model_name='toolcall',
            name='policy_revision',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.CreateModel(
            name='AgentProfile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(help_text='Unique per tenant; never changes.', max_length=40)),
                ('latest_revision', models.PositiveIntegerField(default=0)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='agents', to='toolcalls.tenant')),
            ],
            options={
                'ordering': ['tenant', 'name'],
            },
        ),
        migrations.CreateModel(
            name='AgentRevision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField()),
                ('family', models.CharField(max_length=40)),
                ('model', models.CharField(max_length=100)),
                ('instructions', models.TextField(blank=True)),
                ('settings', models.JSONField(blank=True, default=dict, help_text='ModelSettings by name.')),
                ('tool_names', models.JSONField(help_text='The tools its operations are offered, in order.')),
                ('budgets', models.JSONField(blank=True, default=dict, help_text='Guard overrides (toolcalls.guards).')),
                ('approval_overrides', models.JSONField(blank=True, default=dict, help_text='Tool name → {"policy": "always"} or {"policy": "above_threshold", "threshold": amount}: approvals added to the tool\'s own policy.')),
                ('note', models.CharField(blank=True, help_text='What changed, for people.', max_length=500)),
                ('created_by', models.CharField(help_text='The actor who made it.', max_length=200)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('profile', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='revisions', to='toolcalls.agentprofile')),
            ],
            options={
                'ordering': ['profile', 'number'],
            },
        ),
        migrations.AddField(
            model_name='operation',
            name='agent_revision',
            field=models.ForeignKey(blank=True, help_text='The agent profile revision it was started from.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='operations', to='toolcalls.agentrevision'),
        ),
        migrations.AddConstraint(
            model_name='agentprofile',
            constraint=models.UniqueConstraint(fields=('tenant', 'name'), name='agent_unique_name'),
        ),
        migrations.AddConstraint(
            model_name='agentrevision',
            constraint=models.UniqueConstraint(fields=('profile', 'number'), name='agent_revision_unique'),
        ),
        migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP)),
    ]
