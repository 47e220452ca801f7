"""The harness' `Stack`, configured for measuring rather than for chaos.

- Production tunables (SPEC §9 defaults) instead of the harness' shrunk ones: the settle backoff
  `5,10,20,40,80`, a 120 s lease, a 2 s dispatcher, a 15 s upstream timeout.
- The worker pool is a choice: `prefork` (Celery's default: one process per slot) or `threads`
  (one process, N threads: the steps spend their time waiting on Semrush and PostgreSQL).
- Helpers to find the pids to profile (a gunicorn worker, a Celery pool process).
"""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from tests.harness import ManagedProcess, Stack, StackConfig

# SPEC §9 defaults (config/settings.py's), spelled out so that the harness' shrunk values
# never leak into a figure.
PRODUCTION_SETTINGS: dict[str, Any] = {
    "SERENITY_PROVISION_BACKOFF_SECONDS": [5, 10, 20, 40, 80],
    "SERENITY_SETTLE_POLL_INTERVAL_MS": 1000,
    "SERENITY_SETTLE_POLL_ATTEMPTS": 30,
    "SERENITY_PROVISIONING_STALE_AFTER_SECONDS": 900,
    "SERENITY_STALE_SWEEP_INTERVAL_SECONDS": 60,
    "SEMRUSH_TIMEOUT_SECONDS": 15,
    "JOBS_LEASE_SECONDS": 120,
    "JOBS_DISPATCH_INTERVAL_SECONDS": 2,
    "DB_CONN_MAX_AGE": 60,
}


@dataclass(frozen=True)
class WorkerSetup:
    """How the Celery workers run: `processes` worker processes, each `pool` x `concurrency`."""

    processes: int = 2
    pool: str = "threads"
    concurrency: int = 16

    def describe(self) -> str:
        if self.pool == "prefork":
            return f"{self.processes} x `celery worker -P prefork -c {self.concurrency}`"
        return f"{self.processes} x `celery worker -P {self.pool} -c {self.concurrency}`"


class BenchStack(Stack):
    """A `Stack` whose workers use the pool of `workers` and whose tunables are production's."""

    def __init__(
        self,
        *,
        workers: WorkerSetup,
        settle_seconds: float,
        settings: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        beat: bool = True,
        api_workers: int = 2,
        api_threads: int = 4,
    ) -> None:
        self.worker_setup = workers
        super().__init__(
            StackConfig(
                workers=workers.processes,
                concurrency=workers.concurrency,
                webhook_concurrency=16,  # deploy/Procfile's `webhooks` worker
                api_workers=api_workers,
                api_threads=api_threads,
                beat=beat,
                settle_seconds=settle_seconds,
                settings={**PRODUCTION_SETTINGS, **(settings or {})},
                env={"LOG_LEVEL": "INFO", **(env or {})},
                startup_timeout=120.0,
            ),
            name="bench",
        )

    def _worker_process(self, concurrency: int | None = None) -> ManagedProcess:
        process = super()._worker_process(concurrency)
        # `celery ... worker -Q q -c N ...`: the pool goes right after `worker`.
        index = process.argv.index("worker") + 1
        process.argv[index:index] = ["-P", self.worker_setup.pool]
        return process

    # --- pids to profile --------------------------------------------------------------------

    def api_worker_pids(self) -> list[int]:
        """The gunicorn workers (children of the arbiter)."""
        assert self.api is not None and self.api.pid is not None
        return _children(self.api.pid)

    def worker_exec_pids(self) -> list[int]:
        """The processes that run tasks: the pool children (prefork) or the worker itself."""
        pids: list[int] = []
        for worker in self.workers:
            if worker.pid is None:
                continue
            if self.worker_setup.pool == "prefork":
                pids.extend(_children(worker.pid))
            else:
                pids.append(worker.pid)
        return pids


def _children(pid: int) -> list[int]:
    try:
        text = subprocess.run(  # noqa: S603 - fixed argv
            ["/usr/bin/pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout
    except FileNotFoundError:
        return []
    return [int(line) for line in text.split() if line.strip().isdigit()]


def machine_info(stack: Stack | None = None) -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "memory_gib": round(_mem_total_kib() / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    info["postgresql"] = _first_line(["psql", "--version"])
    info["redis"] = _first_line(["redis-server", "--version"])
    if stack is not None:
        rows = stack.query("SHOW server_version")
        info["postgresql"] = f"PostgreSQL {rows[0]['server_version']}"
    return info


def _mem_total_kib() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _first_line(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout  # noqa: S603
    except FileNotFoundError:
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


# --- CPU accounting ---------------------------------------------------------------------------

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _tree(pid: int) -> list[int]:
    pids = [pid]
    for child in _children(pid):
        pids.extend(_tree(child))
    return pids


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of one live process (its reaped children excluded)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _postgres_pids() -> list[int]:
    try:
        out = subprocess.run(
            ["/usr/bin/pgrep", "-x", "postgres"], capture_output=True, text=True, check=False
        ).stdout
    except FileNotFoundError:
        return []
    return [int(line) for line in out.split() if line.strip().isdigit()]


def cpu_by_component(stack: BenchStack) -> dict[str, float]:
    """CPU seconds used so far by each part of the stack (process trees), plus PostgreSQL (every
    `postgres` process of the machine) and this process (the load generator)."""
    parts: dict[str, list[int]] = {
        "api": _tree(stack.api.pid) if stack.api and stack.api.pid else [],
        "workers": [p for w in stack.workers if w.pid for p in _tree(w.pid)],
        "beat": _tree(stack.beat.pid) if stack.beat and stack.beat.pid else [],
        "simulator": _tree(stack.sim.pid) if stack.sim and stack.sim.pid else [],
        "redis": _tree(stack.redis.pid) if stack.redis and stack.redis.pid else [],
        "postgresql": _postgres_pids(),
    }
    usage = {name: sum(_cpu_seconds(p) for p in pids) for name, pids in parts.items()}
    usage["load generator"] = _cpu_seconds(os.getpid())
    return usage


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per component between two snapshots (processes that ended in between
    are not counted)."""
    return {
        name: round(max(after.get(name, 0.0) - before.get(name, 0.0), 0.0), 2) for name in after
    }


def cpu_probe_ms(runs: int = 5) -> float:
    """The median CPU time of a fixed pure-Python loop, in ms: how fast this (shared, virtual)
    machine's CPU is right now. It varies by up to 2x within minutes here, so every
    measurement records it beside its figures."""
    times = []
    for _ in range(runs):
        started = time.process_time()
        sum(i * i for i in range(1_000_000))
        times.append((time.process_time() - started) * 1000)
    return round(sorted(times)[len(times) // 2], 1)
