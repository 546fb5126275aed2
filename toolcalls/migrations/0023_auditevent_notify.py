"""PostgreSQL notifies each operation whose audit trail a statement appends to.

Every step of an operation appends its audit events, so a statement that inserts events means
the operation changed: a statement-level trigger sends one ``NOTIFY`` per operation it touched,
on the channel ``callgate_operation_<id>`` (no payload). PostgreSQL delivers notifications when
the transaction commits (never for one rolled back) and sends one of each per transaction, so a
listener woken by it reads the committed change. Who waits for an operation (an event stream,
the demo's runner) listens on that operation's channel instead of polling
(``toolcalls.services.watching``); nobody listening costs next to nothing. A no-op on other
databases.
"""

from django.db import migrations

from toolcalls.migrations._postgresql import on_postgresql

FUNCTION = "toolcalls_auditevent_notify"

CREATE = f"""
CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('callgate_operation_' || changed.operation_id, '')
        FROM (SELECT DISTINCT operation_id FROM appended) AS changed;
    RETURN NULL;
END;
$$;
CREATE TRIGGER {FUNCTION}
    AFTER INSERT ON toolcalls_auditevent
    REFERENCING NEW TABLE AS appended
    FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}();
"""

DROP = f"""
DROP TRIGGER IF EXISTS {FUNCTION} ON toolcalls_auditevent;
DROP FUNCTION IF EXISTS {FUNCTION}();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("toolcalls", "0022_merge_console_lists"),
    ]

    operations = [
        migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP)),
    ]
