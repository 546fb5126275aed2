"""Named points where the fault-injection suite makes a worker process pause or die.

Inert unless ``settings.CALLGATE_FAULT_POINTS`` names the point (set from the environment of
the worker under test, e.g. ``CALLGATE_FAULT_POINTS='{"call.before_record": "pause"}'``):

- ``pause``: write ``<CALLGATE_FAULT_DIR>/<point>.<pid>.reached`` and sleep until killed, so the
  test can SIGKILL (or SIGTERM) the process exactly there;
- ``crash``: write the marker and exit at once (``os._exit``), as an OOM kill would;
- ``hold``: write the marker and wait until the test creates ``<point>.release``, then go on
  (the test changes the world under a live worker, e.g. terminates its database connection);
- ``pause_once`` / ``crash_once`` / ``hold_once``: only the first process to reach the point
  acts (an atomic ``<point>.fired`` file decides), so the work can then be recovered by another
  worker.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from django.conf import settings

ACTIONS = ("pause", "crash", "hold", "pause_once", "crash_once", "hold_once")


def reach(point: str) -> None:
    """Act as configured for ``point``; returns at once when it is not configured."""
    action = settings.CALLGATE_FAULT_POINTS.get(point)
    if not action:
        return
    folder = Path(settings.CALLGATE_FAULT_DIR or "/tmp")
    if action.endswith("_once"):
        try:
            os.close(os.open(folder / f"{point}.fired", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    (folder / f"{point}.{os.getpid()}.reached").touch()
    if action.startswith("crash"):
        os._exit(137)
    if action.startswith("hold"):
        while not (folder / f"{point}.release").exists():
            time.sleep(0.05)
        return
    while True:  # paused: the test kills this process
        time.sleep(1)
