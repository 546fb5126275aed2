"""Every write and state change of the engine, split by step of the loop.

Read one turn top to bottom: ``operations.operation_start`` → ``turns.turn_run`` →
``dispatch.call_set_dispatch`` → ``execution.call_execute`` → ``results.call_set_settle`` →
``turns.turn_run`` again with the results.
"""
