"""PostgreSQL refuses TRUNCATE of audit events too, unless the session opted in.

The row trigger (``0006``) refuses UPDATE and DELETE, but TRUNCATE fires no row trigger, so one
statement (a careless ``TRUNCATE``, ``manage.py flush``, a ``CASCADE`` from the operations table)
could empty the whole trail. A statement-level BEFORE TRUNCATE trigger refuses it, whichever
table the TRUNCATE names. A session that sets ``callgate.audit_truncate`` to ``allow`` may
truncate: the test settings do, so the suite can empty the database between tests. Like the row
trigger, this guards against accidents and bugs, not against the table's owner. A no-op on
other databases.
"""

from django.db import migrations

from toolcalls.migrations._postgresql import on_postgresql

TRIGGER = "toolcalls_auditevent_no_truncate"

CREATE = f"""
CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('callgate.audit_truncate', true) = 'allow' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit events are append-only: TRUNCATE of toolcalls_auditevent refused'
        USING HINT = 'Record a new event instead; verify chains with manage.py verify_audit_chain.';
END;
$$;
CREATE TRIGGER {TRIGGER}
    BEFORE TRUNCATE ON toolcalls_auditevent
    FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}();
"""

DROP = f"""
DROP TRIGGER IF EXISTS {TRIGGER} ON toolcalls_auditevent;
DROP FUNCTION IF EXISTS {TRIGGER}();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("toolcalls", "0011_audit_kind_choices"),
    ]

    operations = [
        migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP)),
    ]
