from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The console's operation pages, escalations and search (approval pages live in
    ``approvals``): views over the engine's services and selectors, never the other way."""

    name = "toolcalls.console"
    label = "console"
    verbose_name = "Console"
