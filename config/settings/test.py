"""Test settings: PostgreSQL and Redis on loopback, as ``.ci/services`` starts them.

Tasks are queued to Redis for a real worker; fast unit tests switch to in-process execution with
the ``eager_tasks`` fixture.
"""

from config.settings import env
from config.settings.base import *  # noqa: F403
from config.settings.base import database

# Same ports as .ci/services starts (CALLGATE_PG_PORT, CALLGATE_REDIS_PORT).
_PG_PORT = env.whole("CALLGATE_PG_PORT", default=5432, low=1, high=65535)
_REDIS_PORT = env.whole("CALLGATE_REDIS_PORT", default=6379, low=1, high=65535)
DATABASES = {
    "default": database(
        "TEST_DATABASE_URL", f"postgres://callgate:callgate@127.0.0.1:{_PG_PORT}/callgate"
    ),
}
# The suite empties the database between tests with TRUNCATE, which the audit table refuses to
# any session that has not opted in (toolcalls migration 0012).
DATABASES["default"]["OPTIONS"] = {
    **DATABASES["default"].get("OPTIONS", {}),
    "options": "-c callgate.audit_truncate=allow",
}
CELERY_BROKER_URL = env.text(
    "TEST_CELERY_BROKER_URL", default=f"redis://127.0.0.1:{_REDIS_PORT}/15"
)
CELERY_TASK_ALWAYS_EAGER = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
CALLGATE_RETRY_BASE_MS = 10
CALLGATE_RETRY_CAP_MS = 50
# The tests' webhook receivers listen on 127.0.0.1 (the worker reads this too).
CALLGATE_WEBHOOK_ALLOW_PRIVATE = env.boolean("CALLGATE_WEBHOOK_ALLOW_PRIVATE", default=True)
# The tests' MCP and HTTP tool servers listen on 127.0.0.1 too.
CALLGATE_REMOTE_ALLOW_PRIVATE = env.boolean("CALLGATE_REMOTE_ALLOW_PRIVATE", default=True)
