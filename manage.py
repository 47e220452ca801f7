#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        # Load the settings first: a variable config/env.py refuses (a placeholder left in
        # deploy/production.env, a secret missing) is one line naming it, not a traceback.
        settings.INSTALLED_APPS  # noqa: B018
    except ImproperlyConfigured as refused:
        sys.exit(f"error: {refused}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
