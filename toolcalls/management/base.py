"""The command line's one mapping of :class:`~toolcalls.errors.CallgateError`, and its traces."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from config.observability import tracing_setup
from toolcalls.errors import CallgateError
from toolcalls.models import Tenant


class CallgateCommand(BaseCommand):
    """A management command whose refusals end it as a ``CommandError``: the message on stderr,
    exit status 1, no traceback. It traces as ``OTEL_*`` says, as web and worker processes do,
    so an operation it starts (a fork, the demo's refund) opens its own trace."""

    def execute(self, *args: Any, **options: Any) -> Any:
        tracing_setup()
        try:
            return super().execute(*args, **options)
        except CallgateError as exc:
            raise CommandError(exc.message) from None

    def tenant(self, slug: str) -> Tenant:
        """The tenant whose slug is ``slug``; ends the command when there is none."""
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            message = f"no tenant {slug!r}; manage.py create_tenant adds one"
            raise CommandError(message)
        return tenant


def demo_seed_allowed(command: str) -> None:
    """Ends ``command`` when the settings say ``CALLGATE_DEMO_SEED = False`` (production's): the
    demo's commands seed its tenant and users with the dev passwords the README prints, which
    in a production database would be logins anyone can use."""
    if not getattr(settings, "CALLGATE_DEMO_SEED", True):
        raise CommandError(
            f"{command} seeds the demo's users with the passwords the README prints; production "
            "settings refuse it (run the demo with config.settings.local and its own database)"
        )


def whole_number(*, low: int, high: int, unit: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high``; anything else is argparse's
    one-line usage error naming the option (``argument --port: …``), never a traceback later."""
    bounds = f"{low} to {high}{f' {unit}' if unit else ''}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            message = f"must be a whole number from {bounds}, not {text!r}"
            raise argparse.ArgumentTypeError(message) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {bounds}, not {value}")
        return value

    return parse


#: The ``--port`` of every command that listens.
port_number = whole_number(low=1, high=65535)
