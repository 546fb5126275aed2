from importlib import import_module

from django.apps import AppConfig
from django.conf import settings

from config.settings.env import refused


class ToolcallsConfig(AppConfig):
    name = "toolcalls"
    verbose_name = "Tool calls"

    def ready(self) -> None:
        from toolcalls import tasks, telemetry
        from toolcalls.hooks import audit_listen
        from toolcalls.services import execution, turns
        from toolcalls.services.enqueue import Workers, workers_register

        # Tools register themselves on import; only modules named in settings are imported, so
        # the capability surface is exactly what the host configured.
        for module in settings.CALLGATE_TOOL_MODULES:
            _tools_import(module)
        workers_register(
            Workers(
                run_turn=tasks.run_turn,
                execute_call=tasks.execute_call,
                reconcile_call=tasks.reconcile_call,
                resume_call=tasks.resume_call,
                claimers={
                    tasks.run_turn.name: turns.turn_claim_woken,
                    tasks.execute_call.name: execution.call_claim_woken,
                },
            )
        )
        audit_listen(telemetry.audit_observe)


def _tools_import(module: str) -> None:
    """Import a module of ``CALLGATE_TOOL_MODULES``; one that is not there stops start-up naming
    the setting (a module it imports that is missing is the module's own error, raised as is)."""
    try:
        import_module(module)
    except ModuleNotFoundError as error:
        if error.name is None or not f"{module}.".startswith(f"{error.name}."):
            raise
        value = ",".join(settings.CALLGATE_TOOL_MODULES)
        raise refused("CALLGATE_TOOL_MODULES", value, f"importable modules; no {module}") from None
