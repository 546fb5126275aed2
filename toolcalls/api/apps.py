from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "toolcalls.api"
    label = "api"
    verbose_name = "API and webhooks"

    def ready(self) -> None:
        from toolcalls.api import (
            schema,  # noqa: F401  (registers the OpenAPI auth extension)
            signals,
        )

        signals.connect()
