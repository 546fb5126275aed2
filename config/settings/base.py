"""Settings shared by every environment.

Every value that may differ between machines comes from the environment, read through
``config.settings.env``, which refuses a value out of its range at start-up naming the variable;
``.env.example`` documents each variable. Environment modules (``local``, ``test``,
``production``) only change defaults.
"""

from pathlib import Path
from typing import Any

import environ

from config.log_filters import OVERSIZED_REQUESTS
from config.settings import env
from toolcalls import faultpoints
from toolcalls.guards import BudgetError, budget_checked

BASE_DIR = Path(__file__).resolve().parent.parent.parent

environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

SECRET_KEY = env.text("SECRET_KEY", default="dev-only-insecure-key-change-me")
DEBUG = env.boolean("DEBUG", default=False)
# None would answer every request 400: a value naming no host is refused at start-up.
ALLOWED_HOSTS = env.names("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"], least=1)
CSRF_TRUSTED_ORIGINS = env.names("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "toolcalls",
    "toolcalls.api",
    "toolcalls.console",
    "toolcalls.webhooks",
    "approvals",
    "toolcalls.demo",
    "toolcalls.remote",
]

MIDDLEWARE = [
    "toolcalls.api.request_ids.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.content_policy.ContentPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.login_throttle.LoginThrottleMiddleware",
    "toolcalls.console.middleware.ViewerTimezoneMiddleware",
    "toolcalls.console.middleware.UnsentFormMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "approvals.context_processors.pending_count",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"


def database(url_variable: str, default: str | None = None) -> dict[str, Any]:
    """The ``DATABASES`` entry read from ``url_variable`` (required when ``default`` is ``None``).

    SQLite (the embedded demo): every transaction takes SQLite's write lock when it begins (so
    concurrent requests and the in-process worker's thread queue, as row locks make them on
    PostgreSQL, instead of failing with "database is locked" half-way), waits up to 20 s for it,
    and readers never wait (WAL).

    PostgreSQL: connections are kept for ``DATABASE_CONN_MAX_AGE`` seconds (default 60) and
    checked before reuse. Celery closes a worker's connection after every task otherwise, and
    opening one (a server process, authentication) costs more than a whole turn's statements.
    Parameters are bound by the server and a statement run ``DATABASE_PREPARE_THRESHOLD`` times
    (default 5, psycopg's own) on a connection is prepared there: PostgreSQL then neither parses
    nor, once it settles on a generic plan, plans it again; planning the engine's locking reads
    and combined writes took most of the server's time per step. ``off`` binds on the client
    and prepares nothing, for a pooler that cannot keep prepared statements (PgBouncer's
    transaction mode before 1.21, or without ``max_prepared_statements``).
    """
    config = env.database(url_variable, default=env.REQUIRED if default is None else default)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    else:
        config["CONN_MAX_AGE"] = env.whole("DATABASE_CONN_MAX_AGE", default=60, low=0)
        config["CONN_HEALTH_CHECKS"] = True
        config["OPTIONS"] = {**config.get("OPTIONS", {}), **_statement_options()}
    return config


def _statement_options() -> dict[str, Any]:
    """psycopg's connection options for ``DATABASE_PREPARE_THRESHOLD`` (see :func:`database`)."""
    default: int | None = 5
    threshold = env.read("DATABASE_PREPARE_THRESHOLD", _prepare_threshold, default=default)
    if threshold is None:
        return {}
    return {"server_side_binding": True, "prepare_threshold": threshold}


def _prepare_threshold(value: str) -> int | None:
    """A ``DATABASE_PREPARE_THRESHOLD``: runs (``None`` for ``off``)."""
    if value.strip().lower() == "off":
        return None
    try:
        return env.whole_parser(low=0)(value)
    except ValueError:
        raise ValueError("a whole number of runs, at least 0, or off") from None


DATABASES = {
    "default": database("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'callgate.sqlite3'}"),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "approvals:queue"
LOGOUT_REDIRECT_URL = "login"
# Seconds a console or admin sign-in lasts (from the sign-in, not the last request): a working
# day, where Django's default is two weeks, for a console that approves irreversible payments.
SESSION_COOKIE_AGE = env.whole("SESSION_COOKIE_AGE", default=12 * 3600, low=60)
# Failed sign-ins (console and admin) for one user name from one address within the window
# (seconds) after which its sign-ins answer 429 until the oldest leaves it (config.login_throttle).
CALLGATE_LOGIN_FAILURES = 10
CALLGATE_LOGIN_WINDOW_S = 900

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env.text("STATIC_ROOT", default=str(BASE_DIR / "staticfiles"))

# --- REST API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["toolcalls.api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["toolcalls.api.auth.HasScopes"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # DRF's negotiation, but a media range of q=0 refuses what it matches (406, not JSON).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "toolcalls.api.negotiation.RefusalsHonoured",
    # The Accept header alone chooses the type: ``?format=`` is refused like any unknown parameter.
    "URL_FORMAT_OVERRIDE": None,
    "DEFAULT_PARSER_CLASSES": ["toolcalls.api.parsers.ExactJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "toolcalls.api.schema.ContractSchema",
    "EXCEPTION_HANDLER": "toolcalls.api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"api_key": env.rate("CALLGATE_API_RATE", default="600/min")},
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Callgate API",
    "DESCRIPTION": (
        "Start and follow tool-calling operations, read their turns, calls and audit events, "
        "and decide approvals. Authenticate with `Authorization: Bearer cg_…` (an API key bound "
        "to one tenant and a set of scopes). Every POST needs an `Idempotency-Key`. Unknown "
        "query parameters and body fields are refused. Errors are "
        '`{"error": {"code", "message", "details", "request_id"}}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # Request bodies get their own components (``…Request``): strings that may not be blank say
    # minLength 1 there, and response components are not read-only copies of them.
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets met under one field name in several shapes, each named once.
    "ENUM_NAME_OVERRIDES": {
        "ToolApprovalOverrideEnum": "toolcalls.api.serializers.TOOL_APPROVALS",
        "RemoteToolApprovalEnum": "toolcalls.remote.models.RemoteTool.Approval",
        "RemoteServerKindEnum": "toolcalls.remote.models.RemoteServer.Kind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "toolcalls.api.schema.null_as_branch",
        "toolcalls.api.schema.strict_request_bodies",
        "toolcalls.api.schema.complete_responses",
        "toolcalls.api.schema.link_operations",
    ],
}
# The throttle counts per API key in this cache: Redis in production so every web process
# shares it (CACHE_URL), process memory otherwise.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}
# Seconds after which an Idempotency-Key still in flight is taken to belong to a dead request
# (far beyond any web worker's timeout), so an identical retry may run it.
CALLGATE_API_IN_FLIGHT_S = env.whole("CALLGATE_API_IN_FLIGHT_S", default=300, low=1)
# Live progress (GET /api/v1/operations/{id}/events/stream): seconds between the stream's reads
# of the database, and the longest a stream stays open before the client reconnects with
# Last-Event-ID (each open stream holds a web worker thread). A stream reading without a pause
# would spin its thread's CPU: both are above 0.
CALLGATE_API_STREAM_POLL_S = env.number("CALLGATE_API_STREAM_POLL_S", default=1.0, above=0)
CALLGATE_API_STREAM_MAX_S = env.number("CALLGATE_API_STREAM_MAX_S", default=300.0, above=0)
# Event streams one API key may hold open at once (each holds a web thread): beyond, 429
# too_many_streams. Counted in the default cache (CACHE_URL; Redis to count across processes).
CALLGATE_API_STREAMS_PER_KEY = env.whole("CALLGATE_API_STREAMS_PER_KEY", default=4, low=1)

# --- Celery -------------------------------------------------------------------------------------
# An empty broker URL means "no broker" (the embedded demo): tasks run in-process, after the commit
# that enqueued them, on the serving process's own worker thread, delays and the beat schedule
# honoured (config.inprocess_worker), or inline in a management command. With Redis, the database
# stays the source of truth and the broker only carries wake-ups, so losing a message delays work
# but never loses it.
CELERY_TASK_ALWAYS_EAGER = not env.broker("CELERY_BROKER_URL", default="")
CELERY_BROKER_URL = env.broker("CELERY_BROKER_URL", default="") or "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "callgate"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery would close a worker's database connections around every task; ``config.celery``
# applies Django's own rule instead (CONN_MAX_AGE, health checks). This only stops the former.
CELERY_DB_REUSE_MAX = 1_000_000_000
CELERY_BEAT_SCHEDULE = {
    "expire-due-approvals": {"task": "approvals.expire_due", "schedule": 30.0},
    "webhook-retry-due": {"task": "webhooks.retry_due", "schedule": 30.0},
    "recovery-sweep": {"task": "toolcalls.recovery_sweep", "schedule": 15.0},
}

# --- Callgate -----------------------------------------------------------------------------------
# Modules whose import registers tools with ``toolcalls.registry``.
# (Whether each one imports is known once the apps load: toolcalls.apps refuses one that does not.)
CALLGATE_TOOL_MODULES = env.names("CALLGATE_TOOL_MODULES", default=["toolcalls.demo.tools"])
# How long an approval stays decidable, in seconds.
CALLGATE_APPROVAL_TTL_S = env.whole("CALLGATE_APPROVAL_TTL_S", default=3600, low=1)
# Days an ended operation keeps its request bodies, replies and conversation before
# ``manage.py prune_bodies`` removes them (its calls, results and audit chain stay); the range
# is that command's --older-than-days (its MAX_DAYS).
CALLGATE_BODY_RETENTION_DAYS = env.whole(
    "CALLGATE_BODY_RETENTION_DAYS", default=90, low=0, high=36500
)
# Guards (toolcalls.guards): defaults for every operation, and the most an operation may ask for.
CALLGATE_GUARD_LIMITS = {
    "max_turns": 100,
    "max_tool_calls": 500,
    "max_calls_per_tool": 200,
    "deadline_s": 7 * 24 * 3600,
    "max_input_tokens": 20_000_000,
    "max_output_tokens": 4_000_000,
    "max_cost_usd": 200.0,
    "max_parallel": 16,
    "max_no_progress_turns": 20,
}


def guard_default(variable: str, name: str, default: float) -> float:
    """Guard ``name``'s default from ``variable``, held to the rule an operation's override
    meets (``toolcalls.guards.budget_checked``), within ``CALLGATE_GUARD_LIMITS``."""

    def parse(value: str) -> float:
        try:
            return budget_checked(name, env.decimal(value), limit=CALLGATE_GUARD_LIMITS[name])
        except BudgetError as error:
            raise ValueError(error.message) from None

    return env.read(variable, parse, default=default)


CALLGATE_GUARDS = {
    "max_turns": guard_default("CALLGATE_MAX_TURNS", "max_turns", 12),
    "max_tool_calls": guard_default("CALLGATE_MAX_TOOL_CALLS", "max_tool_calls", 40),
    "max_calls_per_tool": guard_default("CALLGATE_MAX_CALLS_PER_TOOL", "max_calls_per_tool", 15),
    "deadline_s": guard_default("CALLGATE_DEADLINE_S", "deadline_s", 24 * 3600),
    "max_input_tokens": guard_default("CALLGATE_MAX_INPUT_TOKENS", "max_input_tokens", 1_000_000),
    "max_output_tokens": guard_default("CALLGATE_MAX_OUTPUT_TOKENS", "max_output_tokens", 200_000),
    "max_cost_usd": guard_default("CALLGATE_MAX_COST_USD", "max_cost_usd", 5.0),
    "max_parallel": guard_default("CALLGATE_MAX_PARALLEL", "max_parallel", 4),
    "max_no_progress_turns": guard_default(
        "CALLGATE_MAX_NO_PROGRESS_TURNS", "max_no_progress_turns", 3
    ),
}
# USD per million tokens, input and output, by model-name prefix (the longest prefix wins).
CALLGATE_MODEL_PRICES = {
    "gpt-5.1": (1.25, 10.0),
    "gpt-5": (1.25, 10.0),
    "gpt-4o": (2.5, 10.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-haiku-4": (1.0, 5.0),
    "gemini-3-pro": (2.0, 12.0),
    "gemini-2.5-pro": (1.25, 10.0),
    "gemini-2.5-flash": (0.3, 2.5),
}
# Attempts per call: read-only tools retried after a crash or timeout, side effects after a
# reconciler found no effect.
CALLGATE_MAX_CALL_ATTEMPTS = env.whole("CALLGATE_MAX_CALL_ATTEMPTS", default=3, low=1)
# Result size limit per call (bytes of canonical JSON) unless the tool spec sets its own.
CALLGATE_MAX_RESULT_BYTES = env.whole("CALLGATE_MAX_RESULT_BYTES", default=64 * 1024, low=1)
# Results of one model request together (bytes of canonical JSON); over it the largest results
# are cut to marked previews. Per model (longest model-name prefix) from
# CALLGATE_MODEL_REQUEST_RESULT_BYTES, e.g. "gpt-5.1=400000;gemini-2.5-flash=200000".
CALLGATE_MAX_REQUEST_RESULT_BYTES = env.whole(
    "CALLGATE_MAX_REQUEST_RESULT_BYTES", default=256 * 1024, low=1
)
CALLGATE_MODEL_REQUEST_RESULT_BYTES = env.per_prefix("CALLGATE_MODEL_REQUEST_RESULT_BYTES", low=1)
# Retryable provider failures (429, 5xx, overloaded) retried per operation before FAILED.
CALLGATE_MODEL_MAX_RETRIES = env.whole("CALLGATE_MODEL_MAX_RETRIES", default=3, low=0)
CALLGATE_RETRY_BASE_MS = env.whole("CALLGATE_RETRY_BASE_MS", default=500, low=0)
CALLGATE_RETRY_CAP_MS = env.whole("CALLGATE_RETRY_CAP_MS", default=8000, low=0)
# A provider asking to wait longer than this (seconds, retry-after) fails the operation instead.
CALLGATE_RETRY_AFTER_MAX_S = env.whole("CALLGATE_RETRY_AFTER_MAX_S", default=120, low=0)
# Replies ended as a malformed tool call (Gemini MALFORMED_FUNCTION_CALL) asked for again, in a
# row, before the operation fails MALFORMED_REPLY.
CALLGATE_MALFORMED_CALL_RETRIES = env.whole("CALLGATE_MALFORMED_CALL_RETRIES", default=2, low=0)
# Retries of a record (a turn, a call's result) the database failed for a passing reason: the
# connection lost, a serialization failure, a deadlock. Backoff from CALLGATE_RETRY_BASE_MS.
CALLGATE_DB_RETRIES = env.whole("CALLGATE_DB_RETRIES", default=3, low=0)
# Claims of one model request that may go unrecorded (a worker dying each time) before FAILED.
CALLGATE_MAX_TURN_ATTEMPTS = env.whole("CALLGATE_MAX_TURN_ATTEMPTS", default=3, low=1)
# Recovery sweep: runnable work untouched for this long (seconds) is handed out again.
CALLGATE_RECOVERY_GRACE_S = env.whole("CALLGATE_RECOVERY_GRACE_S", default=30, low=1)
# Steps a worker runs along an operation before it hands the rest back to the queue
# (toolcalls.services.enqueue.continuing); 0: every step goes through the broker.
CALLGATE_WORKER_CONTINUE_STEPS = env.whole("CALLGATE_WORKER_CONTINUE_STEPS", default=32, low=0)
# Lease on a claimed turn or call, in ms; a worker that outlives it loses its right to write.
CALLGATE_LEASE_MS = env.whole("CALLGATE_LEASE_MS", default=120_000, low=1)
# Live transport: each provider's API key and base URL (empty: the SDK's default endpoint).
CALLGATE_PROVIDERS: dict[str, dict[str, Any]] = {
    provider: {
        "api_key": env.text(f"CALLGATE_{provider.upper()}_API_KEY", default=""),
        "base_url": env.text(f"CALLGATE_{provider.upper()}_BASE_URL", default="") or None,
    }
    for provider in ("openai", "anthropic", "google")
}
# Live transport: stream replies unless an operation says otherwise; seconds per model request.
CALLGATE_LIVE_STREAMING = env.boolean("CALLGATE_LIVE_STREAMING", default=False)
CALLGATE_MODEL_TIMEOUT_S = env.number("CALLGATE_MODEL_TIMEOUT_S", default=120.0, above=0)
# Times (one second apart) a call waits for an identical request that holds its idempotency key.
CALLGATE_KEY_WAITS = env.whole("CALLGATE_KEY_WAITS", default=30, low=0)
# Byte limit (UTF-8) on the streamed argument text of one call.
CALLGATE_STREAM_MAX_BYTES = env.whole("CALLGATE_STREAM_MAX_BYTES", default=1024 * 1024, low=1)
# Fault-injection suite only: named points where a worker pauses or dies (toolcalls.faultpoints),
# as JSON {"point": "pause" | "crash" | "pause_once" | "crash_once"}, and where it leaves markers.
CALLGATE_FAULT_POINTS = env.json_object("CALLGATE_FAULT_POINTS", values=faultpoints.ACTIONS)
CALLGATE_FAULT_DIR = env.text("CALLGATE_FAULT_DIR", default="")
# Webhooks (toolcalls.webhooks): seconds allowed per POST; attempts before a delivery is
# FAILED (2 s backoff doubling per attempt, capped at an hour); whether endpoints may resolve to
# private, loopback or link-local addresses (never in production: it lets a tenant reach inside).
CALLGATE_WEBHOOK_TIMEOUT_S = env.number("CALLGATE_WEBHOOK_TIMEOUT_S", default=5.0, above=0)
CALLGATE_WEBHOOK_MAX_ATTEMPTS = env.whole("CALLGATE_WEBHOOK_MAX_ATTEMPTS", default=8, low=1)
CALLGATE_WEBHOOK_ALLOW_PRIVATE = env.boolean("CALLGATE_WEBHOOK_ALLOW_PRIVATE", default=False)
# Remote tools (toolcalls.remote): whether MCP servers and HTTP tools may resolve to private,
# loopback or link-local addresses (never in production, as for webhooks); whether an MCP server
# may be a local command over stdio (it runs on Callgate's own hosts); the largest reply body
# read from a remote tool, in bytes (a larger one is a bad reply, never half-read).
CALLGATE_REMOTE_ALLOW_PRIVATE = env.boolean("CALLGATE_REMOTE_ALLOW_PRIVATE", default=False)
CALLGATE_REMOTE_ALLOW_STDIO = env.boolean("CALLGATE_REMOTE_ALLOW_STDIO", default=False)
CALLGATE_REMOTE_MAX_REPLY_BYTES = env.whole(
    "CALLGATE_REMOTE_MAX_REPLY_BYTES", default=1024 * 1024, low=1
)
# Observability: /metrics answers (and metrics are recorded) only with this bearer token set;
# traces (configured by the standard OTEL_* variables, config.observability) carry tool
# arguments and results only when asked.
CALLGATE_METRICS_TOKEN = env.text("CALLGATE_METRICS_TOKEN", default="")
# With a token, every process records into PROMETHEUS_MULTIPROC_DIR when it is set (the
# Prometheus client reads it from the environment): a directory that is not there would fail
# the first metric recorded and every scrape, so no process starts without it.
if CALLGATE_METRICS_TOKEN and env.text("PROMETHEUS_MULTIPROC_DIR", default=""):
    env.directory("PROMETHEUS_MULTIPROC_DIR")
CALLGATE_TRACE_CONTENT = env.boolean("CALLGATE_TRACE_CONTENT", default=False)
# The exporters OTEL_TRACES_EXPORTER may name (config.observability reads the variable itself
# when each process sets its tracing up): any other name stops every process at start-up here,
# where it failed the web server's start with a traceback and left workers running untraced.
TRACE_EXPORTERS = ("otlp", "console", "none")
env.choices("OTEL_TRACES_EXPORTER", default=["none"], options=TRACE_EXPORTERS)
# Demo: honour injected faults (toolcalls.demo.faults); tests only.
CALLGATE_DEMO_FAULTS = env.boolean("CALLGATE_DEMO_FAULTS", default=False)
# Demo: the secret the demo's HTTP tool server checks Callgate's signatures with (dev only).
CALLGATE_DEMO_TOOLS_SECRET = env.text("CALLGATE_DEMO_TOOLS_SECRET", default="demo-tools-secret")
# Demo: refunds above this amount (cents) need an operator's approval.
CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS = env.whole(
    "CALLGATE_REFUND_APPROVAL_THRESHOLD_CENTS", default=2500, low=0
)


# --- Logging ------------------------------------------------------------------------------------
def logging_config(log_format: str, level: str) -> dict[str, object]:
    """Console logging; ``log_format`` is ``text`` or ``json`` (one JSON object per line). Every
    line names the HTTP request it was written for (``request_id``, ``-`` outside a request)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "toolcalls.api.request_ids.RequestIdFilter"},
            "oversized_request": {"()": "config.log_filters.OversizedRequestFilter"},
        },
        "formatters": {
            "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "fmt": ["asctime", "levelname", "name", "request_id", "message"],
            },
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            # The MCP SDK's HTTP client logs every request it sends at INFO.
            "httpx2": {"level": "WARNING"},
            # Django's own handlers (its console one writes under DEBUG) would print each of
            # its lines a second time, unformatted: they reach the root's handler instead.
            "django": {"handlers": []},
            # A form too large or with too many fields: one warning line, no traceback.
            **{
                f"django.security.{name}": {"filters": ["oversized_request"]}
                for name in OVERSIZED_REQUESTS
            },
        },
    }


def log_format(default: str) -> str:
    """``LOG_FORMAT``: ``text`` or ``json``."""
    return env.choice("LOG_FORMAT", default=default, options=("text", "json"), fold=str.lower)


LOG_LEVEL = env.choice(
    "LOG_LEVEL",
    default="INFO",
    options=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
    fold=str.upper,
)
LOGGING = logging_config(log_format("text"), LOG_LEVEL)
