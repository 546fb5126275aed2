"""The garbage collector and a long-running process's start-up objects.

A process that has loaded Django, the apps, the API schema and the SDKs holds some 200,000
objects the cyclic garbage collector tracks, and nearly all of them live as long as the
process. A full collection walks every one of them: on a 2-core machine that took 150 ms, and
the request that triggered it waited for it (the slowest 1 % of API list requests). Frozen, the
collector ignores them from then on and a full collection walks only what came after.

Source: the Python documentation of ``gc.freeze`` ("move them to a permanent generation and
ignore them in all the future collections"), https://docs.python.org/3/library/gc.html.
"""

import gc


def startup_objects_freeze() -> int:
    """Collect what start-up left as garbage, then freeze every object the collector tracks.

    Call once a process has loaded what it serves with and before it serves: the web process
    after its WSGI application (``config.wsgi``), a Celery pool process after its fork
    (``config.celery``). Returns how many objects are frozen now.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
