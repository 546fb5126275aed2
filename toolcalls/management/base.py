"""The command line's one mapping of :class:`~toolcalls.errors.CallgateError`."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from toolcalls.errors import CallgateError
from toolcalls.models import Tenant


class CallgateCommand(BaseCommand):
    """A management command whose refusals end it as a ``CommandError``: the message on stderr,
    exit status 1, no traceback."""

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except CallgateError as exc:
            raise CommandError(exc.message) from None

    def tenant(self, slug: str) -> Tenant:
        """The tenant whose slug is ``slug``; ends the command when there is none."""
        tenant = Tenant.objects.filter(slug=slug).first()
        if tenant is None:
            raise CommandError(f"no tenant {slug!r}")
        return tenant
