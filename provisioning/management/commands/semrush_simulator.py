"""``python manage.py semrush_simulator``: serve the Semrush simulator (SPEC §5.1) until stopped.

Everything is an option (none is read from the environment). ``--port 0`` picks a free port;
the printed line names the one chosen.
``--state-file PATH`` keeps the workspaces, projects and prompts across restarts (``./scripts/run``
passes ``var/simulator-state.json``): read at start when it exists, written (replaced whole) every
second while they change and when the simulator stops.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from provisioning.simulator.server import SemrushSimulator, SimulatorConfigError

SAVE_INTERVAL_SECONDS = 1.0


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def _save(simulator: SemrushSimulator, path: Path, written: str) -> str:
    """Write the simulator's state to `path` (atomically) unless it is `written` already;
    returns what the file now holds."""
    current = json.dumps(simulator.snapshot(), sort_keys=True)
    if current != written:
        partial = path.with_name(path.name + ".partial")
        partial.write_text(current)
        partial.replace(path)
    return current


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
        parser.add_argument(
            "--state-file",
            type=Path,
            default=None,
            help="keep workspaces, projects and prompts in this JSON file across restarts",
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
            state_file: Path | None = options["state_file"]
            if state_file is not None and state_file.exists():
                simulator.restore(json.loads(state_file.read_text()))
            simulator.start()
        except (SimulatorConfigError, OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"cannot start the Semrush simulator: {exc}") from exc
        signal.signal(signal.SIGTERM, _terminate)
        self.stdout.write(
            f"Semrush simulator listening on {simulator.base_url} "
            f"(parents: {', '.join(parents) or 'none'})"
        )
        self.stdout.flush()
        _serve(simulator, state_file)


def _serve(simulator: SemrushSimulator, state_file: Path | None) -> None:
    """Until SIGTERM or Ctrl-C, keeping `state_file` current; then stop (and save) it."""
    written = ""
    try:
        while True:
            if state_file is not None:
                written = _save(simulator, state_file, written)
            time.sleep(SAVE_INTERVAL_SECONDS)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        simulator.stop()
        if state_file is not None:
            _save(simulator, state_file, written)
