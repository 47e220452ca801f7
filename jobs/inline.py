"""A chain run in the caller's thread (SPEC §12.3): a sync request runs the chain's own steps,
as workers would, and waits for the answer. There is no sync version of a step; as with Pulp's
`dispatch(immediate=True)`, one path runs either way.

The rows are the chain's (`services.job_chain_rows`), in memory: nothing of the run is saved,
no message is sent, no lease is held. Each row's registered handler runs (`runner.run_inline`)
and commits its ending as on a worker, the job's write aside (`endings.InlineRun`). What the
ending says decides what follows:

    Continue   the next row of the chain runs
    Repeat     the same step runs again (a settle read) after its delay, slept here: the step
               chose that delay with its caller's patience
    Finish     the chain has ended: the caller answers from the last run
    Defer      the step would give its worker back until later (an upstream Retry-After, no
               permit soon enough): the run stops there, the caller answers that it is busy
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jobs.endings import Continue, InlineRun, Repeat
from jobs.models import AsyncJob
from jobs.runner import run_inline
from jobs.services import job_repeat_row


def chain_run_inline(
    rows: list[AsyncJob], *, sleep: Callable[[float], None] = time.sleep
) -> InlineRun:
    """Run the chain of `rows` (root first) in this thread until it finishes or defers (module
    docstring). Returns the last run, its ending kept; raises what a step raised (after its
    `on_unexpected` ended it)."""
    following = iter(rows[1:])
    run = InlineRun(job=rows[0])
    while True:
        run.job.run_count = 1
        run_inline(run)
        ending = run.ending
        if isinstance(ending, Continue):
            run = InlineRun(job=next(following))
        elif isinstance(ending, Repeat):
            sleep(ending.delay_seconds)
            repeat = job_repeat_row(
                run.job, delay_seconds=ending.delay_seconds, metadata=ending.metadata
            )
            run = InlineRun(job=repeat)
        else:
            return run
