"""Django settings for serenity.

An operator configures the service with the few environment variables of the README's
configuration table, read through `config.env` (the one module that reads the environment);
what follows from them is derived here (cookies and HSTS from SERENITY_TLS, the caches and the
limiter's store from the broker's Redis). Every other value is an internal knob: a plain
setting with a comment, which the tests change through `config.settings_test`, never through
the environment. The defaults run the whole service on one laptop (SQLite, a filesystem broker,
the simulator). With DEBUG off the process refuses to start without SECRET_KEY and
FIELD_ENCRYPTION_KEY(S).

One section per concern, each a module of `config/sections/` imported below (a
section imports what it follows from an earlier one); each setting is defined once, whole
(nothing is appended to or inserted into a list further down).
"""

from __future__ import annotations

# What the blocks below may read: the environment's readers (config/env.py stays the one module
# that reads it) and the settings most blocks follow from.
from config.env import (  # noqa: F401
    env_bool,
    env_float,
    env_int,
    env_secret,
    env_str,
)
from config.sections.api import *  # noqa: F403
from config.sections.apps import *  # noqa: F403
from config.sections.core import *  # noqa: F403
from config.sections.core import BASE_DIR, DEBUG, VAR_DIR  # noqa: F401
from config.sections.database import *  # noqa: F403
from config.sections.jobs import *  # noqa: F403
from config.sections.observability import *  # noqa: F403
from config.sections.provisioning import *  # noqa: F403
from config.sections.security import *  # noqa: F403
from config.sections.workers import *  # noqa: F403

# --- Blocks added during revision 7 ------------------------------------------------------------
# Each helper appends ONE block below, headed `# --- <NAME> (revision 7) ---`; the integrator
# moves each into its section's module of config/sections/ (or a new one) at merge.
