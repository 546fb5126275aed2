"""Every write and state change of the engine, split by step of the loop.

Read one turn top to bottom: ``operations.operation_start`` → ``turns.turn_run`` →
``dispatch.call_set_dispatch`` → ``execution.call_execute`` → ``results.call_finish`` →
``turns.turn_run`` again with the results. Each step runs as one unit of work
(``unit.Step``: locks in a fixed order, each row saved once, audit events and wake-ups with
the commit). Human decisions enter through ``approvals`` (park, decide, expire, resume).
"""
