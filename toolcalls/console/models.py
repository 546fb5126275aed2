"""What the console keeps of its own: the search keys of operations and each person's settings.
Neither is an engine row."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.db import models

from toolcalls.models import Operation, Tenant

#: Time zones a person can choose, by IANA name (the tz database Python ships or the system's).
TIMEZONES = sorted(zoneinfo.available_timezones())


class SearchKey(models.Model):
    """A value an operation can be found by: its subject (``field`` "customer") or a business
    identifier a tool declares searchable (``ToolSpec.search_fields``: order, draft, refund ID)
    in a call's arguments or result. ``value`` is lower-cased; the search matches its prefix."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    operation = models.ForeignKey(Operation, on_delete=models.PROTECT, related_name="+")
    field = models.CharField(max_length=60)
    value = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["operation", "field", "value"], name="searchkey_unique")
        ]
        # ``varchar_pattern_ops`` on PostgreSQL so ``LIKE 'prefix%'`` uses it in any collation.
        indexes = [
            models.Index(
                fields=["value", "tenant"],
                name="searchkey_value",
                opclasses=["varchar_pattern_ops", "int8_ops"],
            )
        ]

    def __str__(self) -> str:
        return f"{self.field}={self.value}"


class ConsoleSettings(models.Model):
    """One person's console settings: the time zone dates are shown in (UTC until chosen)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="console_settings",
    )
    timezone = models.CharField(max_length=64, default="UTC")

    def __str__(self) -> str:
        return f"{self.user_id}: {self.timezone}"
