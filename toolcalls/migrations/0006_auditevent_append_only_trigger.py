"""PostgreSQL refuses UPDATE and DELETE on audit events, whoever issues them.

``AuditEvent`` already refuses both in the ORM; the trigger covers raw SQL, other clients and
bugs. TRUNCATE fires no row trigger, so test flushes keep working. A no-op on other databases.
"""

from django.db import migrations

from toolcalls.migrations._postgresql import on_postgresql

TRIGGER = "toolcalls_auditevent_append_only"

CREATE = f"""
CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only: % of toolcalls_auditevent row % refused',
        TG_OP, OLD.id
        USING HINT = 'Record a new event instead; verify chains with manage.py verify_audit_chain.';
END;
$$;
CREATE TRIGGER {TRIGGER}
    BEFORE UPDATE OR DELETE ON toolcalls_auditevent
    FOR EACH ROW EXECUTE FUNCTION {TRIGGER}();
"""

DROP = f"""
DROP TRIGGER IF EXISTS {TRIGGER} ON toolcalls_auditevent;
DROP FUNCTION IF EXISTS {TRIGGER}();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("toolcalls", "0005_guards_escalation_queueing"),
    ]

    operations = [
        migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP)),
    ]
