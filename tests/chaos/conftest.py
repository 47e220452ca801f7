"""Chaos suite fixtures: a whole `tests.harness.Stack` per test (its own database, Redis,
simulator, API, workers and beat), stopped at teardown; on failure the tail of every process
log is attached to the report (SERENITY_CHAOS_KEEP_LOGS=1 keeps the logs of passing tests too).
Every test here is marked `chaos` (excluded from the default
run; `.ci/run` runs `./scripts/test -m chaos`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.harness import Stack, StackConfig

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.chaos)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    stacks: list[Stack] = getattr(item, "_chaos_stacks", [])
    if report.failed and stacks:
        for stack in stacks:
            report.sections.append((f"stack logs ({stack.id})", stack.dump_logs()))
        item._chaos_failed = True  # type: ignore[attr-defined]


@pytest.fixture
def make_stack(request: pytest.FixtureRequest) -> Iterator[Callable[..., Stack]]:
    """`make_stack(workers=2, settle_seconds=2, settings={...})` → a started Stack."""
    started: list[Stack] = []
    request.node._chaos_stacks = started

    def make(**options: object) -> Stack:
        stack = Stack(StackConfig(**options), name="chaos")  # type: ignore[arg-type]
        started.append(stack)
        return stack.start()

    yield make
    keep = getattr(request.node, "_chaos_failed", False) or bool(
        os.environ.get("SERENITY_CHAOS_KEEP_LOGS")
    )
    for stack in started:
        stack.stop(keep_logs=keep)
        if keep:
            print(f"kept the logs of {stack.id} in {stack.log_dir}")
