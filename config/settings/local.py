"""Embedded defaults for a laptop: SQLite in ``var/``, tasks in-process, DEBUG on."""

from config.settings import env
from config.settings.base import *  # noqa: F403

DEBUG = env.boolean("DEBUG", default=True)
# Webhook receivers on this machine (127.0.0.1) are allowed.
CALLGATE_WEBHOOK_ALLOW_PRIVATE = env.boolean("CALLGATE_WEBHOOK_ALLOW_PRIVATE", default=True)
# Remote tools served on this machine (the demo's MCP and HTTP tool servers) are allowed.
CALLGATE_REMOTE_ALLOW_PRIVATE = env.boolean("CALLGATE_REMOTE_ALLOW_PRIVATE", default=True)
