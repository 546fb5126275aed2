"""The ``DATABASES`` entry: PostgreSQL binds parameters on the server and prepares what repeats."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from config.settings.base import database
from toolcalls.models import Operation

_URL = "postgres://callgate:callgate@127.0.0.1:5432/callgate"


def test_postgresql_binds_on_the_server_and_prepares_after_five_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABASE_PREPARE_THRESHOLD", raising=False)
    config = database("SOME_DATABASE_URL", _URL)
    assert config["OPTIONS"] == {"server_side_binding": True, "prepare_threshold": 5}
    assert (config["CONN_MAX_AGE"], config["CONN_HEALTH_CHECKS"]) == (60, True)
    monkeypatch.setenv("DATABASE_PREPARE_THRESHOLD", "0")
    assert database("SOME_DATABASE_URL", _URL)["OPTIONS"]["prepare_threshold"] == 0


def test_off_binds_on_the_client_for_a_pooler_that_cannot_keep_prepared_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_PREPARE_THRESHOLD", "off")
    assert database("SOME_DATABASE_URL", _URL)["OPTIONS"] == {}


def test_a_threshold_that_is_not_a_number_stops_the_settings_with_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_PREPARE_THRESHOLD", "soon")
    with pytest.raises(ImproperlyConfigured, match=r"^DATABASE_PREPARE_THRESHOLD=soon: "):
        database("SOME_DATABASE_URL", _URL)


def test_sqlite_keeps_its_own_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_PREPARE_THRESHOLD", raising=False)
    options = database("SOME_DATABASE_URL", "sqlite:////tmp/callgate-settings.sqlite3")["OPTIONS"]
    assert "server_side_binding" not in options and options["transaction_mode"] == "IMMEDIATE"


def test_a_database_url_with_no_default_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOME_DATABASE_URL", raising=False)
    with pytest.raises(ImproperlyConfigured, match="SOME_DATABASE_URL"):
        database("SOME_DATABASE_URL")


@pytest.mark.django_db
def test_a_query_run_five_times_is_prepared_on_the_server() -> None:
    for _ in range(6):
        list(Operation.objects.filter(pk=-7))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements "
            "WHERE statement LIKE %s AND statement LIKE %s",
            ['%FROM "toolcalls_operation"%', "%= $1%"],
        )
        [(prepared,)] = cursor.fetchall()
    assert prepared == 1
