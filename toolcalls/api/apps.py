from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "toolcalls.api"
    label = "api"
    verbose_name = "API"

    def ready(self) -> None:
        from toolcalls.api import schema  # noqa: F401  (registers the OpenAPI auth extension)
