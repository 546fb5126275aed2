from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The console's operation pages, escalations and search (approval pages live in
    ``approvals``): views over the engine's services and selectors, never the other way. It
    has the engine insert its search keys with the audit events that carry them (a declared
    hook)."""

    name = "toolcalls.console"
    label = "console"
    verbose_name = "Console"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from toolcalls.console.preferences import timezone_remembered
        from toolcalls.console.search import search_keys_of
        from toolcalls.hooks import audit_rows_from

        audit_rows_from(search_keys_of)
        # Read once at log-in, so no page pays for it.
        user_logged_in.connect(timezone_remembered, dispatch_uid="console-timezone")
