"""A chain run in the caller's thread (SPEC §12.3, §13.5): a sync request runs the rows its
begin wrote, at once, as workers would, and waits for the answer. There is no sync version of a
step; as with Pulp's `dispatch(immediate=True)`, one path runs either way.

Each row is claimed like a worker's delivery (`services.job_claim`: a lease, a claim token) and
its registered handler runs (`runner.run_inline`) with the caller's patience; its ending is
written as on a worker, but nothing is published: the caller runs what follows. What the ending
says decides what follows:

    Continue   the next row of the chain runs (handed over)
    Repeat     the repeat row runs (a settle read) after its delay, slept here: the step chose
               that delay with its caller's patience
    Finish     the chain has ended: the caller answers from the last run
    Defer      the step would give its worker back until later: the run stops there

If the caller dies meanwhile, its claim's lease expires and the dispatcher sends the row to a
worker, which goes on as with any chain (SPEC §6.4).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from jobs.endings import Continue, InlineRun, Repeat
from jobs.models import AsyncJob
from jobs.runner import run_inline
from jobs.services import job_claim


def chain_run_inline(root: AsyncJob, *, sleep: Callable[[float], None] = time.sleep) -> InlineRun:
    """Run the chain of `root` in this thread until it finishes or defers (module docstring).
    Returns the last run, its ending kept (None: its row could not be claimed, a cancel
    finished it); raises what a step raised (after its `on_unexpected` ended it)."""
    job_id = root.pk
    while True:
        claimed = job_claim(job_id=job_id)
        if claimed is None:
            return InlineRun(job=root, claim_token=root.pk)
        assert claimed.claim_token is not None
        run = InlineRun(job=claimed, claim_token=claimed.claim_token)
        run_inline(run)
        ending = run.ending
        if not isinstance(ending, Continue | Repeat) or run.successor is None:
            return run
        if isinstance(ending, Repeat):
            sleep(ending.delay_seconds)
        job_id = run.successor
