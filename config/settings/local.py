"""Embedded defaults for a laptop: SQLite in ``var/``, tasks in-process, DEBUG on."""

from config.settings.base import *  # noqa: F403
from config.settings.base import env

DEBUG = env.bool("DEBUG", default=True)
