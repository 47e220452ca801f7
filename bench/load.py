"""Closed-loop load: N client threads, each with its own keep-alive session, take requests from
one queue until it is empty. Latency is measured per request on the client (monotonic clock)."""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.harness import ApiClient, Response

# One request: given a client (one per thread), send it and return the answer.
Call = Callable[[ApiClient], Response]


@dataclass
class Sample:
    latency: float
    status: int
    body: Any


@dataclass
class LoadResult:
    samples: list[Sample] = field(default_factory=list)
    wall_seconds: float = 0.0
    clients: int = 0

    @property
    def latencies(self) -> list[float]:
        return [s.latency for s in self.samples]

    @property
    def statuses(self) -> dict[int, int]:
        return dict(sorted(Counter(s.status for s in self.samples).items()))

    @property
    def throughput(self) -> float:
        return len(self.samples) / self.wall_seconds if self.wall_seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "requests": len(self.samples),
            "clients": self.clients,
            "wall_s": round(self.wall_seconds, 3),
            "throughput_rps": round(self.throughput, 1),
            "statuses": {str(k): v for k, v in self.statuses.items()},
            **latency_summary(self.latencies),
        }


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def latency_summary(values: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean in milliseconds."""
    if not values:
        return {"p50_ms": 0.0, "p90_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "mean_ms": 0.0}
    return {
        "p50_ms": round(percentile(values, 50) * 1000, 2),
        "p90_ms": round(percentile(values, 90) * 1000, 2),
        "p99_ms": round(percentile(values, 99) * 1000, 2),
        "max_ms": round(max(values) * 1000, 2),
        "mean_ms": round(statistics.fmean(values) * 1000, 2),
    }


def run_load(
    *,
    make_client: Callable[[], ApiClient],
    calls: Sequence[Call],
    clients: int,
    start_together: bool = True,
) -> LoadResult:
    """Send every call once, `clients` at a time. With `start_together`, the threads open their
    connection first and wait at a barrier, so the first requests leave at the same moment."""
    work: queue.SimpleQueue[Call] = queue.SimpleQueue()
    for call in calls:
        work.put(call)
    barrier = threading.Barrier(clients + 1)
    samples: list[Sample] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        client = make_client()
        try:
            if start_together:
                barrier.wait()
            while True:
                try:
                    call = work.get_nowait()
                except queue.Empty:
                    return
                answer = call(client)
                with lock:
                    samples.append(Sample(answer.elapsed, answer.status, answer.body))
        except BaseException as exc:
            errors.append(exc)
            if start_together and not barrier.broken:
                barrier.abort()
        finally:
            client.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    if start_together:
        barrier.wait()
    started = time.monotonic()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    if errors:
        raise RuntimeError(f"{len(errors)} client threads failed; first: {errors[0]!r}")
    return LoadResult(samples=samples, wall_seconds=wall, clients=clients)


def warm_up(make_client: Callable[[], ApiClient], call: Call, *, times: int = 20) -> None:
    client = make_client()
    try:
        for _ in range(times):
            call(client)
    finally:
        client.close()
