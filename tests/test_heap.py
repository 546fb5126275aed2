"""Start-up objects are frozen out of the garbage collector's walks (``config.heap``)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.heap import startup_objects_freeze
from tests.conftest import REPO
from tests.test_deploy import PRODUCTION_ENV


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_a_full_collection_no_longer_walks_what_was_loaded() -> None:
    frozen = startup_objects_freeze()  # a frozen object can still go by its refcount: ≈
    assert frozen > 10_000
    assert len(gc.get_objects()) < frozen / 10  # what the collector still walks


def test_the_web_process_freezes_once_its_application_is_loaded(tmp_path: Path) -> None:
    # A web process starts only with collectstatic's manifest in STATIC_ROOT (config.settings.env).
    (tmp_path / "staticfiles.json").write_text('{"paths": {}, "version": "1.1"}')
    script = "import gc, config.wsgi; print(gc.get_freeze_count())"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, **PRODUCTION_ENV, "STATIC_ROOT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 10_000


def test_a_celery_pool_process_freezes_once_forked() -> None:
    from celery import signals

    from config.celery import _startup_objects_freeze

    receivers = [receiver() for _key, receiver in signals.worker_process_init.receivers]
    assert _startup_objects_freeze in receivers
