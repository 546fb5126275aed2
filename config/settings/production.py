"""Production: PostgreSQL, Redis, HTTPS only, JSON log lines. Every secret comes from the env."""

from config.settings import env
from config.settings.base import *  # noqa: F403
from config.settings.base import database, log_format, logging_config

DEBUG = False
SECRET_KEY = env.text("SECRET_KEY")
DATABASES = {"default": database("DATABASE_URL")}
CELERY_BROKER_URL = env.broker("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = False
LOGGING = logging_config(log_format("json"), LOG_LEVEL)  # noqa: F405
# No demo users with the README's passwords in a production database (demo_setup and the like).
CALLGATE_DEMO_SEED = False

# gunicorn serves static files itself through WhiteNoise (after `collectstatic`).
MIDDLEWARE.insert(  # noqa: F405
    MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,  # noqa: F405
    "whitenoise.middleware.WhiteNoiseMiddleware",
)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.boolean("SECURE_SSL_REDIRECT", default=True)
# Health probes and the metrics scraper reach a process directly over plain HTTP (no proxy, no
# X-Forwarded-Proto): answered where they ask. A redirect to HTTPS would fail the scrape, and a
# probe counting any 3xx as success would never see the process unready.
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health/(live|ready)$", r"^metrics$"]
# ... and by the process's address, a Host ALLOWED_HOSTS does not list (config.probes).
MIDDLEWARE.insert(0, "config.probes.ProbeHostMiddleware")  # noqa: F405
SECURE_HSTS_SECONDS = env.whole("SECURE_HSTS_SECONDS", default=31_536_000, low=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
STORAGES = {
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
