"""The simulator's control routes (`/__sim/…`, no token, never logged).

To add control routes, write a module of your own beside `basic` with a `ROUTES` list of
`ControlRoute`s (`routing.py`: a path below /__sim/, `{name}` segments, a handler per method)
and add its ROUTES to the tuple below; nothing else changes.
"""

from __future__ import annotations

from provisioning.simulator.control import basic, drift
from provisioning.simulator.control.routing import ControlRoute

ROUTES: tuple[ControlRoute, ...] = (*basic.ROUTES, *drift.ROUTES)
