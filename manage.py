#!/usr/bin/env python
"""Django's command-line utility for Callgate."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from django.core.management import execute_from_command_line

    from config.settings.env import SettingRefused

    try:
        execute_from_command_line(sys.argv)
    except SettingRefused as error:
        # A variable's value the settings refuse: its name and what is expected, nothing else.
        sys.exit(f"Callgate cannot start: {error}")


if __name__ == "__main__":
    main()
