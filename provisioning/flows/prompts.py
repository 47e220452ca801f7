"""Prompts: add prompts to a brand's market projects, sync or as a `classifyPrompts` job
(SPEC §4.5).

Flow, the same for both modes (the sync path and the job call `prompts_run`):

1. Validate without any upstream call (`flows.prompt_inputs`): 1 to `SERENITY_MAX_PROMPTS`
   prompts, each naming a live market of the brand that has a project (non-deleted, not a
   `creating` reservation, with a project and workspace id); else 400 `invalidRequest` naming
   the prompt's index.
2. Plan: drop duplicates within the request (same market, same text trimmed and case-folded;
   the first occurrence wins), cut the rest into batches (the job: `BATCH_SIZE` prompts; sync:
   one batch) and each batch into one *unit* per market, in first-appearance order.
3. Per unit: skip prompts already stored for that market (`Prompt.text_key`, the first
   filter), classify the others (`provisioning.intent.classify_intent`), push them with one
   `add_prompts` call (the v3 tagged route, `{name, tags}` each, SPEC §12.1; the answer's
   items map back by `name`, and one Semrush reports `is_new: false` counts as `skipped`), and
   in one transaction store the pushed rows, mark a `live` market `live_with_unpublished_updates`
   and (job) the progress checkpoint.
4. Publish each touched project once (plus any project of the request's markets that an
   earlier run left with unpublished updates), and flip its market back to `live`.
5. Answer `{created, skipped, failed}`.

Decisions:

- A push that fails or times out counts its prompts as `failed`. It is never replayed: the
  client does not replay a POST, and neither does this module (a replay would duplicate the
  prompts upstream). An upstream credential failure (401/403) on a push is also a `failed`
  count, not a 401 answer: prompts are answered per market, so one market's refusal must not
  hide the others' results. After a 401 (the credential itself was refused) the remaining
  units are not sent and count as `failed`.
- A 429 after the client's own retries means the push did not run (Semrush rejects it at the
  edge). Sync: `failed`. The job instead releases its claim and runs again after `Retry-After`,
  resuming at the same unit: that is not a blind retry.
- A failed publish does not change the counts: the prompts are in the project's draft and
  stored here. The market stays `live_with_unpublished_updates`, and the next request naming
  that market publishes it (re-sending the same request is enough: its prompts are skipped and
  the project is published).
- Idempotency of the job: the rows of a unit and the checkpoint (units done, counts, touched
  and published markets) are written in one transaction, conditional on the claim token, so a
  re-run after a crash resumes after the last finished unit with the same counts. The one
  window left is a crash between a successful push and that transaction: the re-run pushes
  that unit again (Semrush has no idempotency key for prompts).
- Two concurrent requests adding the same new prompt may both push it (the model has no
  reservation state for a prompt); the database keeps one row.
- A job run processes units until about half a lease has passed, then checkpoints and hands
  itself over to a fresh delivery, so no run nears the task's time limit.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs import services as job_services
from jobs.endings import Defer, Finish, StepResult
from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from jobs.runner import StepRun
from kernel.errors import DomainError
from provisioning.exceptions import job_error
from provisioning.flows.prompt_inputs import prompts_validate
from provisioning.flows.prompt_run import (
    BATCH_SIZE,
    ClaimLostError,
    LazyClient,
    RunDeferredError,
    RunPolicy,
    prompts_run,
)
from provisioning.outcome import Accepted, Outcome
from provisioning.prompt_plan import (
    Progress,
    PromptInput,
    plan_units,
)
from serenity.models import Brand, BrandStatus

logger = logging.getLogger("serenity.provisioning")


def prompts_add(
    *, brand: Brand, prompts: Sequence[Mapping[str, Any]], run_async: bool
) -> Outcome | Accepted:
    """`POST B/serenity/prompts`. Validates (400 `invalidRequest`, nothing written or called),
    then either does the work (200 `{created, skipped, failed}`) or commits one
    `classifyPrompts` job holding the validated prompts (202; no upstream call).

    Raises `InvalidRequestError`; sync may raise `ConfigurationError` (503) before any push.
    Upstream failures never raise: they are counts.
    """
    validated = prompts_validate(brand=brand, prompts=prompts)
    if run_async:
        with transaction.atomic():
            job = job_services.job_chains_create(
                [
                    job_services.ChainSpec(
                        organization_id=brand.organization_id,
                        brand_id=brand.pk,
                        job_type=JobType.CLASSIFY_PROMPTS,
                        first=job_services.StepSpec(
                            JobStep.CLASSIFY_PROMPTS,
                            metadata={"prompts": [p.as_metadata() for p in validated]},
                        ),
                    )
                ]
            )[0]
        return Accepted(job=job)
    counts = prompts_run(
        brand=brand,
        prompts=validated,
        policy=RunPolicy(),
        progress=Progress(),
        client=LazyClient(brand),
    )
    return Outcome(200, counts)


def _job_checkpoint(job: AsyncJob, claim_token: uuid.UUID) -> Callable[[Progress], bool]:
    def checkpoint(progress: Progress) -> bool:
        return (
            AsyncJob.objects.filter(
                pk=job.pk, status=JobStatus.IN_PROGRESS, claim_token=claim_token
            ).update(
                metadata={**job.metadata, "progress": progress.as_metadata()},
                updated_at=timezone.now(),
            )
            == 1
        )

    return checkpoint


def classify_prompts_step(run: StepRun) -> StepResult:
    """The `classifyPrompts` job: the sync path in batches of `BATCH_SIZE`, checkpointing and
    renewing the lease after every unit and every publish. Ends COMPLETED with
    `{status: 200, body: {created, skipped, failed}, outcome: "succeeded"}`. A re-run resumes
    from `metadata.progress`. No attempt is involved (nothing is provisioned)."""
    job = run.job
    prompts = [PromptInput.from_metadata(p) for p in job.metadata.get("prompts", [])]
    brand = (
        Brand.objects.select_related("organization")
        .filter(pk=job.brand_id)
        .exclude(status=BrandStatus.DELETED)
        .first()
        if job.brand_id is not None
        else None
    )
    if brand is None:
        plan = plan_units(prompts, batch_size=BATCH_SIZE)
        done = Progress(failed=sum(len(u.prompts) for u in plan.units))
        return _finish(Outcome(200, done.counts(plan)))
    policy = RunPolicy(
        batch_size=BATCH_SIZE,
        checkpoint=_job_checkpoint(job, run.claim_token),
        renew=run.renew,
        defer_rate_limited=True,
        deadline=time.monotonic() + settings.JOBS_LEASE_SECONDS / 2,
    )
    client = LazyClient(brand)
    try:
        counts = prompts_run(
            brand=brand,
            prompts=prompts,
            policy=policy,
            progress=Progress.from_metadata(job.metadata.get("progress")),
            client=client,
        )
    except RunDeferredError as deferred:
        return Defer(delay_seconds=deferred.delay_seconds)
    except ClaimLostError:
        logger.info("prompts job lost its claim; another delivery continues it")
        return None
    except DomainError as error:
        return Finish(JobStatus.FAILED, error=job_error(error))
    return _finish(Outcome(200, counts))


def _finish(outcome: Outcome) -> Finish:
    return Finish(JobStatus.COMPLETED, result=outcome.as_job_result())


def on_unexpected(run: StepRun, exc: BaseException) -> StepResult:
    """Anything unexpected: the job FAILED `jobFailed` with a generic message. Not retryable:
    prompts of finished units are stored and would be skipped, but a unit cut short may have
    reached Semrush."""
    return Finish(
        JobStatus.FAILED,
        error={
            "code": "jobFailed",
            "message": "The job failed unexpectedly.",
            "retryable": False,
        },
    )
