"""Reading settings from the environment: every variable goes through :func:`read` (or one of the
readers built on it), and a value it cannot take stops start-up with :class:`SettingRefused`
(an ``ImproperlyConfigured``) saying ``NAME=value: what is expected``.

The web process, the Celery worker and every management command load the settings before they
do anything, so none of them starts with a value that would fail later, request by request.
A parser takes the variable's text and returns the value, or raises ``ValueError`` whose text
says what is expected; the text is the same whatever was wrong with the value.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import django
import environ
from django.core.exceptions import ImproperlyConfigured
from kombu.transport import TRANSPORT_ALIASES

T = TypeVar("T")

#: The ``default`` of a variable that must be set.
REQUIRED: Any = object()

_TRUE = frozenset({"true", "on", "ok", "y", "yes", "1"})
_FALSE = frozenset({"false", "off", "n", "no", "0"})
_WHOLE = re.compile(r"[+-]?[0-9]+")
#: A DRF throttle rate: requests per second, minute, hour or day (``SimpleRateThrottle`` reads
#: the period's first letter).
_RATE = re.compile(r"([0-9]+)/(s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)")
_PASSWORD_IN_URL = re.compile(r"(//[^/:@]*:)[^/@]*@")


class SettingRefused(ImproperlyConfigured):
    """A variable's value Callgate cannot start with; the text is ``NAME=value: expected``."""


#: The one line a process that cannot start with a refused value ends with, as ``manage.py``
#: does: a web server's (:func:`server_setup`), a Celery worker's or beat's
#: (:func:`_refusal_reported`).
CANNOT_START = "Callgate cannot start: {}"


def _refusal_reported(kind: type[BaseException], error: BaseException, trace: Any) -> None:
    """A refusal nothing caught (a Celery worker or beat loading the settings) ends its process
    with :data:`CANNOT_START`'s one line, as ``manage.py`` does, instead of a traceback; any
    other exception is reported as before."""
    if isinstance(error, SettingRefused):
        sys.stderr.write(CANNOT_START.format(error) + "\n")
        return
    _exception_report(kind, error, trace)


_exception_report = sys.excepthook
sys.excepthook = _refusal_reported

#: gunicorn's exit status for an application that cannot load: its master then stops ("App
#: failed to load"), where it boots again and again a worker that exited with another status.
APP_LOAD_ERROR = 4


def server_setup() -> None:
    """``django.setup()`` for a web server's entry point (``config.wsgi``, ``config.asgi``): a
    refused value ends the process with :data:`CANNOT_START`'s one line and
    :data:`APP_LOAD_ERROR`, instead of a traceback in every worker the server boots; so does a
    static files manifest that is not there (:func:`_static_files_collected`)."""
    try:
        django.setup(set_prefix=False)
        _static_files_collected()
    except SettingRefused as error:
        sys.stderr.write(CANNOT_START.format(error) + "\n")
        sys.exit(APP_LOAD_ERROR)


def _static_files_collected() -> None:
    """Refuses ``STATIC_ROOT`` when static files are served from ``collectstatic``'s manifest
    (production) and it holds none: every page, the error pages too, would be a 500 while the
    health checks said ready."""
    from django.conf import settings
    from django.contrib.staticfiles.storage import ManifestFilesMixin
    from django.core.files.storage import storages

    storage = storages["staticfiles"]
    if isinstance(storage, ManifestFilesMixin) and not storage.exists(storage.manifest_name):
        manifest = storage.manifest_name
        expected = f"the directory manage.py collectstatic filled (no {manifest} there)"
        raise refused("STATIC_ROOT", str(settings.STATIC_ROOT), expected)


def refused(name: str, value: str | None, expected: str) -> SettingRefused:
    """The refusal of ``name``'s ``value`` (``None``: not set); a URL's password is masked."""
    shown = "(not set)" if value is None else _PASSWORD_IN_URL.sub(r"\1***@", value)
    return SettingRefused(f"{name}={shown}: {expected}")


def read(name: str, parse: Callable[[str], T], *, default: T) -> T:
    """``name``'s value as ``parse`` reads it, or ``default`` when it is not set (refused when
    ``default`` is :data:`REQUIRED`, with the text of ``parse``'s ``ValueError`` for a value)."""
    value = os.environ.get(name)
    if value is None and default is not REQUIRED:
        return default
    try:
        return parse("" if value is None else value)
    except ValueError as error:
        raise refused(name, value, str(error)) from None


def text(name: str, *, default: str = REQUIRED) -> str:
    """Any text (the empty text too, but for a variable that must be set)."""

    def parse(value: str) -> str:
        if not value and default is REQUIRED:
            raise ValueError("a value (required)")
        return value

    return read(name, parse, default=default)


def boolean(name: str, *, default: bool) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``, in any case): a typo
    is refused rather than read as false."""
    return read(name, _boolean, default=default)


def _boolean(value: str) -> bool:
    folded = value.strip().lower()
    if folded in _TRUE or folded in _FALSE:
        return folded in _TRUE
    raise ValueError("true or false (or 1/0, yes/no, on/off)")


def whole(name: str, *, default: int, low: int, high: int | None = None) -> int:
    """A whole number from ``low`` (to ``high``)."""
    return read(name, whole_parser(low=low, high=high), default=default)


def whole_parser(*, low: int, high: int | None = None) -> Callable[[str], int]:
    """The parser of :func:`whole`, for a part of a value (:func:`per_prefix`)."""
    expected = f"a whole number, at least {low}"
    if high is not None:
        expected = f"a whole number from {low} to {high}"

    def parse(value: str) -> int:
        if not _WHOLE.fullmatch(value.strip()):
            raise ValueError(expected)
        number = int(value)
        if number < low or (high is not None and number > high):
            raise ValueError(expected)
        return number

    return parse


def number(name: str, *, default: float, above: float) -> float:
    """A finite decimal number greater than ``above``."""
    return read(name, lambda value: _number(value, above=above), default=default)


def _number(value: str, *, above: float) -> float:
    expected = f"a number above {above:g}"
    parsed = decimal(value, expected=expected)
    if parsed <= above:
        raise ValueError(expected)
    return float(parsed)


def decimal(value: str, *, expected: str = "a number") -> float:
    """``value`` as a finite number (whole ones as ``int``), else ``ValueError(expected)``."""
    stripped = value.strip()
    if _WHOLE.fullmatch(stripped):
        return int(stripped)
    try:
        parsed = float(stripped)
    except ValueError:
        raise ValueError(expected) from None
    if not math.isfinite(parsed):
        raise ValueError(expected)
    return parsed


def choice(name: str, *, default: str, options: tuple[str, ...], fold: Callable[[str], str]) -> str:
    """One of ``options``, compared after ``fold`` (``str.lower``, ``str.upper``)."""

    def parse(value: str) -> str:
        folded = fold(value.strip())
        if folded not in options:
            raise ValueError(f"one of {', '.join(options)}")
        return folded

    return read(name, parse, default=default)


def names(name: str, *, default: list[str], least: int = 0) -> list[str]:
    """A comma-separated list (blanks around each item dropped, empty items skipped) of at
    least ``least`` items."""

    def parse(value: str) -> list[str]:
        items = _items(value)
        if len(items) < least:
            raise ValueError(f"comma-separated, at least {least}")
        return items

    return read(name, parse, default=default)


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def choices(name: str, *, default: list[str], options: tuple[str, ...]) -> list[str]:
    """A comma-separated list, each item one of ``options`` (in any case; empty items skipped)."""

    def parse(value: str) -> list[str]:
        items = [item.lower() for item in _items(value)]
        if any(item not in options for item in items):
            raise ValueError(f"comma-separated, each one of {', '.join(options)}")
        return items

    return read(name, parse, default=default)


def rate(name: str, *, default: str) -> str:
    """A request rate as DRF's throttles read it: ``N/s``, ``N/min``, ``N/hour``, ``N/day``
    (or the period spelt out, ``second``, ``minutes``, ``h``, …), N at least 1; DRF would read
    any word by its first letter (``600/week`` fails each request, ``600/month`` is per minute)."""

    def parse(value: str) -> str:
        match = _RATE.fullmatch(value.strip())
        if not match or int(match[1]) < 1:
            raise ValueError("requests per period: N/s, N/min, N/hour or N/day, N at least 1")
        return match[0]

    return read(name, parse, default=default)


def per_prefix(name: str, *, low: int) -> dict[str, int]:
    """``prefix=N`` pairs separated by ``;`` (``gpt-5.1=400000;gemini-2.5-flash=200000``),
    each N a whole number at least ``low``; empty: none."""
    expected = (
        "prefix=N pairs separated by ';' (gpt-5.1=400000;gemini-2.5-flash=200000), "
        f"each N a whole number, at least {low}"
    )
    count = whole_parser(low=low)

    def parse(value: str) -> dict[str, int]:
        pairs = {}
        for pair in filter(None, (p.strip() for p in value.split(";"))):
            prefix, equals, amount = pair.partition("=")
            if not (equals and prefix.strip()):
                raise ValueError(expected)
            try:
                pairs[prefix.strip()] = count(amount)
            except ValueError:
                raise ValueError(expected) from None
        return pairs

    return read(name, parse, default={})


def json_object(name: str, *, values: tuple[str, ...]) -> dict[str, str]:
    """A JSON object whose values are each one of ``values``; not set: ``{}``."""
    expected = f"a JSON object whose values are each one of {', '.join(values)}"

    def parse(value: str) -> dict[str, str]:
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(expected) from None
        if not isinstance(parsed, dict) or any(v not in values for v in parsed.values()):
            raise ValueError(expected)
        return parsed

    return read(name, parse, default={})


#: Database URL schemes (django-environ's) of the backends Callgate runs on: PostgreSQL, and
#: SQLite for the embedded demo. Another backend fails later (no driver, or none of the
#: PostgreSQL triggers that keep the audit trail append-only).
_DATABASE_SCHEMES = frozenset(
    scheme
    for scheme, engine in environ.Env.DB_SCHEMES.items()
    if engine in ("django.db.backends.postgresql", "django.db.backends.sqlite3")
)


def database(name: str, *, default: str = REQUIRED) -> dict[str, Any]:
    """A PostgreSQL or SQLite database URL as a ``DATABASES`` entry."""

    def parse(value: str) -> dict[str, Any]:
        scheme = value.partition("://")[0]
        if scheme not in _DATABASE_SCHEMES:
            raise ValueError(
                "a database URL: postgres://USER:PASSWORD@HOST:PORT/NAME or sqlite:///PATH"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # django-environ warns before it fails
            return dict(environ.Env.db_url_config(value))

    return read(name, parse, default=default if default is REQUIRED else parse(default))


def broker(name: str, *, default: str = REQUIRED) -> str:
    """A Celery broker URL (``redis://HOST:PORT/DB``, or another transport Celery knows), or
    empty for none when ``default`` is empty: Celery would read any other text as the host of
    an AMQP broker and retry it for ever."""
    expected = "a broker URL: redis://HOST:PORT/DB (or rediss://)"

    def parse(value: str) -> str:
        if not value and default is not REQUIRED:
            return value
        scheme, separator, rest = value.strip().partition("://")
        if not (separator and rest and scheme.lower() in TRANSPORT_ALIASES):
            raise ValueError(expected)
        return value.strip()

    return read(name, parse, default=default)


def cache(name: str, *, default: str) -> dict[str, Any]:
    """A cache URL (django-environ's schemes: ``redis://…``, ``locmemcache://``) as a
    ``CACHES`` entry."""

    def parse(value: str) -> dict[str, Any]:
        try:
            return dict(environ.Env.cache_url_config(value))
        except ImproperlyConfigured:
            raise ValueError("a cache URL: redis://HOST:PORT/DB or locmemcache://") from None

    return read(name, parse, default=parse(default))


def directory(name: str) -> str:
    """An existing directory this process may write in (required)."""

    def parse(value: str) -> str:
        if not (Path(value).is_dir() and os.access(value, os.W_OK | os.X_OK)):
            raise ValueError("an existing directory this process can write in")
        return value

    return read(name, parse, default=REQUIRED)
