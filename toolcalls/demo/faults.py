"""Named fault points in the demo handlers, for tests that need a side effect to succeed and
its answer to be lost. Off unless ``settings.CALLGATE_DEMO_FAULTS`` is set."""

from __future__ import annotations

import time

from django.conf import settings
from django.db import transaction
from django.db.models import F

from toolcalls import faultpoints
from toolcalls.demo.models import Fault


def fault_point(point: str) -> None:
    """Sleep as a :class:`Fault` row for ``point`` says (consuming one of its ``times``); the
    engine's process-level fault points apply too, as ``demo.<point>``."""
    faultpoints.reach(f"demo.{point}")
    if not settings.CALLGATE_DEMO_FAULTS:
        return
    with transaction.atomic():
        fault = Fault.objects.select_for_update().filter(point=point, times__gt=0).first()
        if fault is None:
            return
        Fault.objects.filter(pk=fault.pk).update(times=F("times") - 1)
    time.sleep(fault.delay_ms / 1000)
