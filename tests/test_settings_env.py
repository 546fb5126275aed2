"""Settings read from the environment: a value out of its range stops start-up with one line,
``NAME=value: what is expected``, never a traceback or a service that fails request by request."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from rest_framework.throttling import SimpleRateThrottle

from config.settings import env
from config.settings.base import CALLGATE_GUARD_LIMITS, guard_default
from tests.conftest import REPO
from toolcalls import faultpoints
from toolcalls.apps import _tools_import
from toolcalls.guards import GUARDS, BudgetError, budgets_for

_READERS: dict[str, Callable[[str], Any]] = {
    "whole": lambda name: env.whole(name, default=3, low=1),
    "port": lambda name: env.whole(name, default=5432, low=1, high=65535),
    "positive": lambda name: env.number(name, default=1.0, above=0),
    "boolean": lambda name: env.boolean(name, default=False),
    "log format": lambda name: env.choice(
        name, default="text", options=("text", "json"), fold=str.lower
    ),
    "rate": lambda name: env.rate(name, default="600/min"),
    "per prefix": lambda name: env.per_prefix(name, low=1),
    "fault points": lambda name: env.json_object(name, values=faultpoints.ACTIONS),
    "database": lambda name: env.database(name, default="sqlite:////tmp/x.sqlite3"),
    "cache": lambda name: env.cache(name, default="locmemcache://"),
    "directory": lambda name: env.directory(name),
    "broker": lambda name: env.broker(name, default=""),
    "exporters": lambda name: env.choices(name, default=[], options=("otlp", "console", "none")),
}


@pytest.mark.parametrize(
    ("reader", "value", "expected"),
    [
        ("whole", "abc", "a whole number, at least 1"),
        ("whole", "0", "a whole number, at least 1"),
        ("whole", "2.5", "a whole number, at least 1"),
        ("port", "70000", "a whole number from 1 to 65535"),
        ("positive", "abc", "a number above 0"),
        ("positive", "0", "a number above 0"),
        ("positive", "-1", "a number above 0"),
        ("positive", "inf", "a number above 0"),
        ("boolean", "abc", "true or false"),
        ("boolean", "", "true or false"),
        ("log format", "xml", "one of text, json"),
        ("rate", "abc", "requests per period"),
        ("rate", "600/week", "requests per period"),
        ("rate", "0/min", "requests per period"),
        ("per prefix", "abc", "prefix=N pairs separated by ';'"),
        ("per prefix", "gpt-5.1=400000,gemini-2.5-flash=200000", "separated by ';'"),
        ("per prefix", "gpt-5.1=0", "each N a whole number, at least 1"),
        ("fault points", "abc", "a JSON object whose values are each one of pause"),
        ("fault points", '{"call.after_claim": "explode"}', "a JSON object"),
        ("fault points", '["pause"]', "a JSON object"),
        ("database", "abc", "a database URL"),
        ("database", "mysql://app@db.internal/app", "postgres://USER:PASSWORD@HOST:PORT/NAME"),
        ("broker", "abc", "a broker URL: redis://HOST:PORT/DB"),
        ("broker", "redis:/127.0.0.1:6379/0", "a broker URL"),
        ("broker", "http://127.0.0.1:6379/0", "a broker URL"),
        ("exporters", "jaeger", "each one of otlp, console, none"),
        ("exporters", "otlp,zipkin", "each one of otlp, console, none"),
        ("cache", "abc", "a cache URL"),
        ("directory", "/nonexistent", "an existing directory this process can write in"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_variable_and_what_it_takes(
    monkeypatch: pytest.MonkeyPatch, reader: str, value: str, expected: str
) -> None:
    monkeypatch.setenv("CALLGATE_SOME_SETTING", value)
    with pytest.raises(ImproperlyConfigured) as refused:
        _READERS[reader]("CALLGATE_SOME_SETTING")
    assert str(refused.value).startswith(f"CALLGATE_SOME_SETTING={value}: ")
    assert expected in str(refused.value)
    # Nothing chained: the refusal is the whole story.
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


@pytest.mark.parametrize(
    ("reader", "value", "read"),
    [
        ("whole", " 7 ", 7),
        ("positive", "0.25", 0.25),
        ("boolean", "Yes", True),
        ("boolean", "off", False),
        ("log format", "JSON", "json"),
        ("per prefix", "gpt-5.1=400000; gemini-2.5-flash=200000;", {
            "gpt-5.1": 400000, "gemini-2.5-flash": 200000,
        }),
        ("fault points", '{"call.after_claim": "crash_once"}', {"call.after_claim": "crash_once"}),
        ("broker", "redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("broker", "", ""),
        ("exporters", " OTLP, console ", ["otlp", "console"]),
    ],
)  # fmt: skip
def test_a_value_in_range_is_read(
    monkeypatch: pytest.MonkeyPatch, reader: str, value: str, read: object
) -> None:
    monkeypatch.setenv("CALLGATE_SOME_SETTING", value)
    assert _READERS[reader]("CALLGATE_SOME_SETTING") == read


def test_a_variable_not_set_reads_its_default_and_a_required_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CALLGATE_SOME_SETTING", raising=False)
    assert _READERS["whole"]("CALLGATE_SOME_SETTING") == 3
    with pytest.raises(ImproperlyConfigured, match=r"^CALLGATE_SOME_SETTING=\(not set\): "):
        env.text("CALLGATE_SOME_SETTING")


def test_a_url_refused_shows_no_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALLGATE_SOME_SETTING", "mysq://app:s3cret@db.internal/app")
    with pytest.raises(ImproperlyConfigured) as refused:
        env.database("CALLGATE_SOME_SETTING")
    assert "s3cret" not in str(refused.value)
    assert str(refused.value).startswith("CALLGATE_SOME_SETTING=mysq://app:***@db.internal/app: ")


@pytest.mark.parametrize(
    "rate", ["600/min", "10/s", "5/second", "2/hours", "100/day", "7/m", "3/d", "1/minutes"]
)
def test_a_rate_taken_is_one_drf_throttles_read(monkeypatch: pytest.MonkeyPatch, rate: str) -> None:
    monkeypatch.setenv("CALLGATE_SOME_SETTING", rate)
    taken = env.rate("CALLGATE_SOME_SETTING", default="600/min")
    assert SimpleRateThrottle.parse_rate(SimpleRateThrottle.__new__(SimpleRateThrottle), taken)


@pytest.mark.parametrize(
    ("variable", "guard", "value"),
    [
        ("CALLGATE_MAX_PARALLEL", "max_parallel", "0"),
        ("CALLGATE_MAX_TURNS", "max_turns", "-1"),
        ("CALLGATE_MAX_TURNS", "max_turns", "1000"),
        ("CALLGATE_MAX_TOOL_CALLS", "max_tool_calls", "2.5"),
        ("CALLGATE_MAX_COST_USD", "max_cost_usd", "-1"),
        ("CALLGATE_MAX_COST_USD", "max_cost_usd", "200.5"),
    ],
)
def test_a_guard_default_meets_the_rule_an_operation_override_meets(
    monkeypatch: pytest.MonkeyPatch, variable: str, guard: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ImproperlyConfigured) as refused:
        guard_default(variable, guard, 1)
    with pytest.raises(BudgetError) as override:
        budgets_for({guard: float(value) if "." in value else int(value)})
    assert str(refused.value) == f"{variable}={value}: {override.value.message}"


def test_every_guard_default_may_be_its_limit_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    for guard in GUARDS:
        limit = CALLGATE_GUARD_LIMITS[guard]
        monkeypatch.setenv("CALLGATE_SOME_GUARD", str(limit))
        assert guard_default("CALLGATE_SOME_GUARD", guard, 1) == limit
        monkeypatch.setenv("CALLGATE_SOME_GUARD", str(limit + 1))
        with pytest.raises(ImproperlyConfigured, match=f"{guard} may be at most {limit}"):
            guard_default("CALLGATE_SOME_GUARD", guard, 1)


def test_a_tool_module_that_is_not_there_is_refused_naming_the_setting() -> None:
    with (
        override_settings(CALLGATE_TOOL_MODULES=["toolcalls.demo.tools", "toolcalls.nosuchmod"]),
        pytest.raises(ImproperlyConfigured) as refused,
    ):
        _tools_import("toolcalls.nosuchmod")
    assert str(refused.value) == (
        "CALLGATE_TOOL_MODULES=toolcalls.demo.tools,toolcalls.nosuchmod: importable modules; "
        "no toolcalls.nosuchmod"
    )


def test_a_tool_module_missing_one_of_its_own_imports_fails_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "callgate_broken_tools.py").write_text("import callgate_no_such_dependency\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(ModuleNotFoundError, match="callgate_no_such_dependency"):
            _tools_import("callgate_broken_tools")
    finally:
        sys.path.remove(str(tmp_path))


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        # Read with the settings.
        ("CALLGATE_API_RATE", "600/week", "requests per period"),
        ("CELERY_BROKER_URL", "notaurl", "a broker URL"),
        ("OTEL_TRACES_EXPORTER", "jaeger", "each one of otlp, console, none"),
        ("ALLOWED_HOSTS", " , ", "comma-separated, at least 1"),  # every request would be 400
        ("SESSION_COOKIE_AGE", "0", "a whole number, at least 60"),
        # Known once the apps load.
        ("CALLGATE_TOOL_MODULES", "nosuchmod", "importable modules; no nosuchmod"),
    ],
)
def test_a_command_started_with_a_bad_value_says_only_which_and_why(
    variable: str, value: str, expected: str
) -> None:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local", variable: value}
    ran = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode != 0
    [line] = ran.stderr.splitlines()  # one line, no traceback
    assert line.startswith(f"Callgate cannot start: {variable}={value}: ")
    assert expected in line


#: How each long-running process is started (README, Running with PostgreSQL, Redis and workers).
_PROCESSES = {
    "worker": ["-m", "celery", "-A", "config", "worker", "--queues=callgate-refusal-check"],
    "beat": ["-m", "celery", "-A", "config", "beat", "--schedule", "{tmp}/beat-schedule"],
    "web": ["-m", "gunicorn", "config.wsgi", "--workers", "1", "--bind", "127.0.0.1:0"],
}


@pytest.mark.parametrize("process", list(_PROCESSES))
@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("SECRET_KEY", None, "a value (required)"),
        ("CALLGATE_MAX_TURNS", "0", "max_turns must be a positive number"),
    ],
)
def test_a_process_started_with_a_bad_value_stops_with_one_line(
    tmp_path: Path, process: str, variable: str, value: str | None, expected: str
) -> None:
    """The web server, a worker and beat stop at once with the one line manage.py prints; the web
    server's master stops too, rather than booting a worker again and again."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": "x" * 64,
        "DATABASE_URL": "postgres://callgate:callgate@127.0.0.1:5432/callgate",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    }
    environment.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if value is None:
        environment.pop(variable, None)
    else:
        environment[variable] = value
    argv = [argument.format(tmp=tmp_path) for argument in _PROCESSES[process]]
    ran = subprocess.run(
        [sys.executable, *argv], cwd=REPO, env=environment, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert ran.returncode != 0
    assert "Traceback" not in ran.stderr, ran.stderr
    refusals = [line for line in ran.stderr.splitlines() if line.startswith("Callgate cannot")]
    shown = "(not set)" if value is None else value
    assert len(refusals) == 1, ran.stderr
    assert refusals[0].startswith(f"Callgate cannot start: {variable}={shown}: ")
    assert expected in refusals[0]
    if process != "web":
        assert ran.stderr.strip() == refusals[0]  # nothing else


def test_the_trace_exporters_taken_are_the_ones_a_process_sets_up() -> None:
    from config.observability import _EXPORTERS
    from config.settings.base import TRACE_EXPORTERS

    assert set(TRACE_EXPORTERS) == {*_EXPORTERS, "none"}


def test_a_web_server_without_collected_static_files_stops_saying_what_to_run(
    tmp_path: Path,
) -> None:
    """Production serves static files from ``collectstatic``'s manifest: without it every page
    (the error pages too) would be a 500 while the health checks say ready."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": "x" * 64,
        "DATABASE_URL": "postgres://callgate:callgate@127.0.0.1:5432/callgate",
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "STATIC_ROOT": str(tmp_path),
    }
    environment.pop("PROMETHEUS_MULTIPROC_DIR", None)
    ran = subprocess.run(
        [sys.executable, *_PROCESSES["web"]], cwd=REPO, env=environment, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 4, ran.stderr  # gunicorn: "App failed to load", the master stops
    assert "Traceback" not in ran.stderr, ran.stderr
    [refusal] = [line for line in ran.stderr.splitlines() if line.startswith("Callgate cannot")]
    assert refusal.startswith(f"Callgate cannot start: STATIC_ROOT={tmp_path}: ")
    assert "manage.py collectstatic" in refusal


def test_a_console_sign_in_lasts_a_working_day_by_default() -> None:
    """Django's default is two weeks; a sign-in that approves payments lasts 12 hours, from the
    sign-in (``SESSION_COOKIE_AGE``)."""
    from django.conf import settings

    assert settings.SESSION_COOKIE_AGE == 12 * 3600
    assert not settings.SESSION_SAVE_EVERY_REQUEST
