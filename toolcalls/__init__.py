"""The engine: operations, turns, calls, the state machine, registry, dispatch and execution."""
