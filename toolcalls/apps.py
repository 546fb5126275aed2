from importlib import import_module

from django.apps import AppConfig
from django.conf import settings


class ToolcallsConfig(AppConfig):
    name = "toolcalls"
    verbose_name = "Tool calls"

    def ready(self) -> None:
        # Tools register themselves on import; only modules named in settings are imported, so
        # the capability surface is exactly what the host configured.
        for module in settings.CALLGATE_TOOL_MODULES:
            import_module(module)
