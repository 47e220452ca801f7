"""Sampling profiles with py-spy (`py-spy record --format raw`: folded stacks) of running
processes, summarised into the functions that cost the most CPU.

py-spy attaches with ptrace (root, or `kernel.yama.ptrace_scope=0`). When it is missing or
cannot attach, the profile is simply absent from the report.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import TracebackType
from typing import Any

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
OUR_PACKAGES = ("serenity/", "provisioning/", "jobs/", "config/")


class Profiler:
    """`with Profiler(pids, out_dir, tag):` records every pid while the block runs."""

    def __init__(self, pids: list[int], out_dir: Path | None, tag: str, rate: int = 200) -> None:
        self.pids = pids
        self.out_dir = out_dir
        self.tag = tag
        self.rate = rate
        self.files: list[Path] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self.error: str | None = None

    @property
    def enabled(self) -> bool:
        return self.out_dir is not None and Path(PY_SPY).exists() and bool(self.pids)

    def __enter__(self) -> Profiler:
        if not self.enabled:
            return self
        assert self.out_dir is not None
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for pid in self.pids:
            path = self.out_dir / f"{self.tag}-{pid}.folded"
            self.files.append(path)
            self._procs.append(
                subprocess.Popen(  # noqa: S603 - our own argv
                    [
                        PY_SPY,
                        "record",
                        "--pid",
                        str(pid),
                        "--rate",
                        str(self.rate),
                        "--format",
                        "raw",
                        "--nonblocking",
                        # Only the thread holding the GIL: where the CPU goes, not where
                        # threads wait (16 threads per worker mostly wait on I/O).
                        "--gil",
                        "--output",
                        str(path),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for proc in self._procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        for proc in self._procs:
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode not in (0, -signal.SIGINT) and err:
                self.error = err.decode(errors="replace")[-500:]

    def summary(self, top: int = 15) -> dict[str, Any] | None:
        files = [f for f in self.files if f.exists() and f.stat().st_size]
        if not files:
            return {"error": self.error} if self.error else None
        return summarize(files, top=top)


def _parse(frame: str) -> tuple[str, str]:
    """`func (path:line)` → (`func`, `path`)."""
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip(), ""
    return match.group("func"), match.group("file")


def _short(path: str) -> str:
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    for package in OUR_PACKAGES:
        index = path.find("/" + package)
        if index >= 0:
            return path[index + 1 :]
    return path


def _area(path: str) -> str:
    """Which library a leaf frame belongs to."""
    short = _short(path)
    if short.startswith(OUR_PACKAGES):
        return "our code"
    head = short.split("/", 1)[0]
    groups = {
        "django": "django",
        "rest_framework": "DRF",
        "psycopg": "psycopg",
        "psycopg_binary": "psycopg",
        "requests": "requests/urllib3",
        "urllib3": "requests/urllib3",
        "celery": "celery/kombu",
        "kombu": "celery/kombu",
        "billiard": "celery/kombu",
        "redis": "redis-py",
        "gunicorn": "gunicorn",
        "json": "json",
        "logging": "logging",
        "prometheus_client": "prometheus_client",
        "pycountry": "pycountry",
    }
    return groups.get(head.removesuffix(".py"), "other stdlib/libs")


def summarize(files: list[Path], *, top: int = 15) -> dict[str, Any]:
    """Inclusive share of this project's functions, self share of every leaf, share by area."""
    total = 0
    inclusive: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            total += count
            frames = [f for f in stack.split(";") if f]
            seen: set[str] = set()
            for frame in frames:
                func, file = _parse(frame)
                short = _short(file)
                if short.startswith(OUR_PACKAGES):
                    key = f"{short}:{func}"
                    if key not in seen:
                        seen.add(key)
                        inclusive[key] += count
            if frames:
                func, file = _parse(frames[-1])
                leaves[f"{_short(file)}:{func}"] += count
                areas[_area(file)] += count

    def share(counter: Counter[str]) -> list[list[Any]]:
        return [[key, round(100 * n / total, 1)] for key, n in counter.most_common(top)]

    return {
        "samples": total,
        "files": [str(f) for f in files],
        "inclusive_ours": share(inclusive),
        "self_leaves": share(leaves),
        "areas": share(areas),
    }
