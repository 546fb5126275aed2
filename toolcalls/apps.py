from importlib import import_module

from django.apps import AppConfig
from django.conf import settings


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
            import_module(module)
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
