"""The test suite's settings: the product's (`config.settings`), with the internal knobs the
tests must turn. pytest selects it (pyproject.toml) and so do the suite's worker processes."""

from config.settings import *  # noqa: F403

# The tests' webhook receivers listen on random loopback ports.
WEBHOOK_STANDARD_PORTS_ONLY = False
