"""Settings for type checking only.

mypy's Django plugin imports the settings module, and the real one refuses to load without
SECRET_KEY, FIELD_ENCRYPTION_KEY and ALLOWED_HOSTS when DEBUG is off; placeholders let
`mypy .` run anywhere.
"""

import os

os.environ.setdefault("SECRET_KEY", "mypy-only")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "mypy-only-placeholder-of-32-characters")
os.environ.setdefault("ALLOWED_HOSTS", "mypy-only")

from config.settings import *  # noqa: F403
