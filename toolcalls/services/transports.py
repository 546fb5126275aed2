"""Which transport carries an operation's model requests, from its row and settings."""

from __future__ import annotations

from django.conf import settings

from providers.families import get_adapter
from providers.live import LiveSettings, live_transport
from providers.replay import ReplayTransport
from providers.transports import ModelTransport
from toolcalls.errors import CallgateError
from toolcalls.models import Operation


def live_settings(provider: str) -> LiveSettings | None:
    """Credentials for ``provider`` from ``CALLGATE_PROVIDERS``; ``None`` when no API key is set."""
    config = settings.CALLGATE_PROVIDERS.get(provider) or {}
    if not config.get("api_key"):
        return None
    return LiveSettings(
        api_key=config["api_key"],
        base_url=config.get("base_url"),
        timeout_s=settings.CALLGATE_MODEL_TIMEOUT_S,
    )


class MissingCredentials(CallgateError, LookupError):
    """A live operation's provider has no API key configured (``no_credentials``)."""


def transport_for(operation: Operation) -> ModelTransport:
    """The replay transport over the operation's script, or the live SDK transport of its family.

    Raises :class:`MissingCredentials` when a live operation's provider has no API key.
    """
    adapter = get_adapter(operation.family)
    if operation.transport == Operation.Transport.REPLAY:
        replies = operation.replay_script.replies if operation.replay_script else []
        return ReplayTransport(adapter=adapter, replies=replies)
    config = live_settings(adapter.provider)
    if config is None:
        raise MissingCredentials("no_credentials", f"no API key configured for {adapter.provider}")
    return live_transport(operation.family, config, stream=operation.stream)
