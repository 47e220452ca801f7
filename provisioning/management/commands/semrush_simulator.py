"""``python manage.py semrush_simulator``: serve the Semrush simulator (SPEC §5.1) until stopped.

Everything is an option (none is read from the environment). ``--port 0`` picks a free port;
the printed line names the one chosen.
"""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from provisioning.simulator.server import SemrushSimulator, SimulatorConfigError


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(0)


class Command(BaseCommand):
    help = "Serve an in-memory fake of the Semrush workspace and project APIs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument(
            "--token",
            default="dev-token",
            help="the one bearer token accepted (any other answers 401)",
        )
        parser.add_argument(
            "--parent",
            action="append",
            dest="parents",
            metavar="ID",
            help="a parent workspace id to seed; repeat for several",
        )
        parser.add_argument(
            "--settle-seconds",
            type=float,
            default=None,
            help="initial settleSeconds (default 3; change at runtime with POST /__sim/config)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        parents = options["parents"] or []
        config: dict[str, Any] = {}
        settle = options["settle_seconds"]
        if settle is not None:
            config["settleSeconds"] = settle
        try:
            simulator = SemrushSimulator(
                host=options["host"],
                port=options["port"],
                token=options["token"],
                parents=parents,
                config=config,
            )
            simulator.start()
        except (SimulatorConfigError, OSError) as exc:
            raise CommandError(f"cannot start the Semrush simulator: {exc}") from exc
        signal.signal(signal.SIGTERM, _terminate)
        self.stdout.write(
            f"Semrush simulator listening on {simulator.base_url} "
            f"(parents: {', '.join(parents) or 'none'})"
        )
        self.stdout.flush()
        try:
            signal.pause()
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            simulator.stop()
