from django.apps import AppConfig


class RemoteConfig(AppConfig):
    """Remote tools: registered servers, their reviewed tools and the log of what changed."""

    name = "toolcalls.remote"
    label = "remote"
    verbose_name = "Remote tools"
