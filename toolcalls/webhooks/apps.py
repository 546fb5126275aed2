from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """The webhook outbox: it hears of audit events through the engine's one declared hook
    (``toolcalls.hooks``) and delivers them, signed, to the tenants' endpoints."""

    name = "toolcalls.webhooks"
    label = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from toolcalls.hooks import audit_listen
        from toolcalls.webhooks import outbox, signals, tasks, wakeups

        wakeups.bind(fanout=tasks.webhook_fanout, deliver=tasks.webhook_deliver)
        audit_listen(outbox.audit_event_heard)
        signals.connect()
