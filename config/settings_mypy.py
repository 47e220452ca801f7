"""Settings for type checking only.

mypy's Django plugin imports the settings module, and the real one refuses to load without
SECRET_KEY and FIELD_ENCRYPTION_KEY when DEBUG is off; placeholders let `mypy .` run anywhere.
"""

import os

os.environ.setdefault("SECRET_KEY", "mypy-only")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "mypy-only")

from config.settings import *  # noqa: F403
