"""The prompts' run (SPEC §4.5), shared by the sync request and the `classifyPrompts` job
(`flows.prompts`, whose docstring holds the flow and its decisions): per unit, skip what is
stored, classify, push, store; then publish each touched project once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from provisioning.flows.prompt_inputs import brand_names_for, prompt_markets
from provisioning.intent import classify_intent
from provisioning.prompt_plan import (
    Plan,
    Progress,
    PromptInput,
    plan_units,
    upstream_results,
)
from provisioning.semrush import (
    SemrushClient,
    SemrushError,
    SemrushGoneError,
    SemrushRateLimitedError,
    SemrushUnauthorizedError,
)
from provisioning.upstream import client_for_org
from provisioning.workspace import workspace_gone_heal
from serenity.models import Brand, Market, MarketStatus, Prompt

logger = logging.getLogger("serenity.provisioning")

BATCH_SIZE = 100
DEFAULT_RATE_LIMIT_DELAY_SECONDS = 30.0


class RunDeferredError(Exception):
    """Stop this run and continue in a later delivery after `delay_seconds` (job only)."""

    def __init__(self, delay_seconds: float) -> None:
        super().__init__(f"deferred by {delay_seconds}s")
        self.delay_seconds = delay_seconds


class ClaimLostError(Exception):
    """The job's claim was lost (lease expired and re-claimed, or finished): write nothing more."""


@dataclass
class RunPolicy:
    """How `prompts_run` differs between the sync path and the job.

    `checkpoint(progress)` runs after every unit (inside the transaction that stores its rows)
    and every publish, and returns False when the claim is lost; `renew()` extends the lease
    after each checkpoint; `defer_rate_limited` makes a 429 postpone the run instead of
    counting `failed`; `deadline` (monotonic) hands the rest of the work to a later delivery.
    """

    batch_size: int | None = None
    checkpoint: Callable[[Progress], bool] = lambda _progress: True
    renew: Callable[[], bool] = lambda: True
    defer_rate_limited: bool = False
    deadline: float | None = None

    def past_deadline(self) -> bool:
        """The run is to hand the rest of its work over to a later delivery (job only)."""
        return self.deadline is not None and time.monotonic() > self.deadline

    def rate_limited(self, exc: SemrushRateLimitedError) -> None:
        """A 429 after the client's own retries (the call did not run): the job's run stops,
        to continue after `Retry-After`; the sync path goes on (the caller counts it)."""
        if self.defer_rate_limited:
            raise RunDeferredError(exc.retry_after or DEFAULT_RATE_LIMIT_DELAY_SECONDS) from exc


class LazyClient:
    """The org's client, built on first use: a request whose prompts are all duplicates needs
    no Semrush configuration."""

    def __init__(self, brand: Brand) -> None:
        self._brand = brand
        self._client: SemrushClient | None = None

    def __call__(self) -> SemrushClient:
        if self._client is None:
            self._client = client_for_org(self._brand.organization, brand_id=str(self._brand.pk))
        return self._client


def _owned(market: Market, brand: Brand) -> bool:
    """A market in the brand's own sub-workspace (403 there means the workspace is gone)."""
    return market.workspace_id != brand.organization.semrush_parent_workspace_id


def _store_unit(
    *,
    market: Market,
    pushed: Sequence[PromptInput],
    intents: Sequence[str],
    ids: Sequence[str | None],
) -> None:
    """Store the pushed prompts and flag a live market as having unpublished updates.
    Caller holds the transaction. A row a concurrent request stored meanwhile is kept."""
    Prompt.objects.bulk_create(
        [
            Prompt(
                market=market,
                text=prompt.text,
                text_key=prompt.key,
                geo_target_id=prompt.geo_target_id,
                language_code=prompt.language_code,
                tags=list(prompt.tags),
                intent=intent,
                semrush_prompt_id=upstream_id,
            )
            for prompt, intent, upstream_id in zip(pushed, intents, ids, strict=True)
        ],
        ignore_conflicts=True,
    )
    Market.objects.filter(pk=market.pk, status=MarketStatus.LIVE, deleted_at__isnull=True).update(
        status=MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES, updated_at=timezone.now()
    )


def _still_claimed(policy: RunPolicy, kept_claim: bool) -> None:
    """After a checkpoint: stop if the claim was lost, else extend the lease."""
    if not kept_claim or not policy.renew():
        raise ClaimLostError()


def prompts_run(
    *,
    brand: Brand,
    prompts: Sequence[PromptInput],
    policy: RunPolicy,
    progress: Progress,
    client: Callable[[], SemrushClient],
) -> dict[str, int]:
    """Push, store and publish (module docstring, steps 2 to 5), resuming at `progress`.
    Holds no transaction across an upstream call. Returns the counts.
    Raises `RunDeferredError` / `ClaimLostError` for the job only."""
    plan = plan_units(prompts, batch_size=policy.batch_size)
    brand_names = brand_names_for(brand)
    credential_refused = False
    started_at = progress.units_done
    for index in range(progress.units_done, len(plan.units)):
        # Hand over to a fresh delivery after the deadline, but only once this run has moved.
        if index > started_at and policy.past_deadline():
            raise RunDeferredError(0.0)
        unit = plan.units[index]
        market = prompt_markets(brand).get(unit.slice_key)  # re-read: it may be deleted meanwhile
        if market is None or credential_refused:
            pushed = _Pushed(failed=len(unit.prompts))
        else:
            pushed = _unit_push(
                brand=brand,
                market=market,
                unit=unit.prompts,
                brand_names=brand_names,
                policy=policy,
                client=client,
            )
        credential_refused = credential_refused or pushed.credential_refused
        kept_claim = _unit_record(
            market=market, pushed=pushed, units_done=index + 1, progress=progress, policy=policy
        )
        _still_claimed(policy, kept_claim)

    _publish_touched(
        brand=brand,
        plan=plan,
        policy=policy,
        progress=progress,
        client=client,
        moved=progress.units_done > started_at,
    )
    return progress.counts(plan)


@dataclass
class _Pushed:
    """What one unit's push did: the prompts pushed (with their intents and upstream ids), and
    how many were skipped (stored already) or failed; whether the credential was refused."""

    prompts: list[PromptInput] = field(default_factory=list)
    intents: list[str] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    skipped: int = 0
    failed: int = 0
    credential_refused: bool = False


def _unit_push(
    *,
    brand: Brand,
    market: Market,
    unit: Sequence[PromptInput],
    brand_names: list[str],
    policy: RunPolicy,
    client: Callable[[], SemrushClient],
) -> _Pushed:
    """Push one unit's new prompts to its market's project with one `add_prompts` call (module
    docstring, step 3, and its decisions on failures). A 403 of the brand's own workspace is
    healed and its error raised (SPEC §10.2: the request ends with `subworkspaceGone`, units
    already pushed stay stored)."""
    known = Prompt.objects.filter(market=market, text_key__in=[p.key for p in unit])
    stored = set(known.values_list("text_key", flat=True))
    new = [p for p in unit if p.key not in stored]
    pushed = _Pushed(skipped=len(unit) - len(new))
    if not new:
        return pushed
    intents = [classify_intent(p.text, brand_names) for p in new]
    try:
        answer = client().add_prompts(
            workspace_id=str(market.workspace_id),
            project_id=str(market.semrush_project_id),
            prompts=[{"name": p.text, "tags": list(p.tags)} for p in new],
            owned=_owned(market, brand),
        )
    except SemrushRateLimitedError as exc:
        policy.rate_limited(exc)
        pushed.failed = len(new)
    except SemrushGoneError as exc:
        raise workspace_gone_heal(
            client=client(),
            brand_id=brand.pk,
            workspace_id=str(market.workspace_id),
            parent_id=brand.organization.semrush_parent_workspace_id,
        ) from exc
    except SemrushError as exc:
        # Never replayed: a lost answer may still have added the prompts.
        extra = {"market_id": str(market.pk), "count": len(new), "error_class": type(exc).__name__}
        logger.warning("adding prompts failed; counted as failed", extra=extra)
        pushed.failed = len(new)
        pushed.credential_refused = isinstance(exc, SemrushUnauthorizedError)
    else:
        _pushed_answer(pushed, new, intents, upstream_results(answer, new))
    return pushed


def _pushed_answer(
    pushed: _Pushed,
    sent: Sequence[PromptInput],
    intents: Sequence[str],
    results: Sequence[tuple[str | None, bool]],
) -> None:
    """Record a push's answer on `pushed`: the prompts Semrush added (with their intents and
    ids) are `created`; one it already held (`is_new: false`, its own dedupe) is `skipped`
    and not stored, as nothing was added for it."""
    for prompt, intent, (upstream_id, is_new) in zip(sent, intents, results, strict=True):
        if not is_new:
            pushed.skipped += 1
            continue
        pushed.prompts.append(prompt)
        pushed.intents.append(intent)
        pushed.ids.append(upstream_id)


def _unit_record(
    *,
    market: Market | None,
    pushed: _Pushed,
    units_done: int,
    progress: Progress,
    policy: RunPolicy,
) -> bool:
    """In one transaction: the unit's pushed rows (`_store_unit`), its counts and the progress
    checkpoint. Returns whether the checkpoint kept the claim. The rows are committed even when
    the claim is lost: they record what is upstream, and whoever holds the job now then skips
    them instead of pushing them again."""
    with transaction.atomic():
        if pushed.prompts and market is not None:
            _store_unit(
                market=market, pushed=pushed.prompts, intents=pushed.intents, ids=pushed.ids
            )
            if str(market.pk) not in progress.touched:
                progress.touched.append(str(market.pk))
        progress.units_done = units_done
        progress.created += len(pushed.prompts)
        progress.skipped += pushed.skipped
        progress.failed += pushed.failed
        return policy.checkpoint(progress)


def _publish_touched(
    *,
    brand: Brand,
    plan: Plan,
    policy: RunPolicy,
    progress: Progress,
    client: Callable[[], SemrushClient],
    moved: bool,
) -> None:
    """Publish each project this run pushed to, once, and any project of the request's markets
    still flagged with unpublished updates (an earlier publish failed or was interrupted).
    `moved`: this run has done some work already (so it may hand over at the deadline)."""
    markets = prompt_markets(brand)
    by_id = {str(m.pk): m for m in markets.values()}
    flagged = [
        str(market.pk)
        for market in map(markets.get, plan.slices)
        if market is not None and market.status == MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES
    ]
    for market_id in dict.fromkeys([*progress.touched, *flagged]):
        market = by_id.get(market_id)
        if market_id in progress.published or market is None:
            continue
        if moved and policy.past_deadline():
            raise RunDeferredError(0.0)
        try:
            client().publish_project(
                workspace_id=str(market.workspace_id),
                project_id=str(market.semrush_project_id),
                owned=_owned(market, brand),
            )
        except SemrushRateLimitedError as exc:
            policy.rate_limited(exc)
            logger.warning("publishing prompts was rate limited", extra={"market_id": market_id})
        except SemrushError as exc:
            logger.warning(
                "publishing prompts failed; the market keeps unpublished updates",
                extra={"market_id": market_id, "error_class": type(exc).__name__},
            )
        else:
            Market.objects.filter(
                pk=market.pk, status=MarketStatus.LIVE_WITH_UNPUBLISHED_UPDATES
            ).update(status=MarketStatus.LIVE, updated_at=timezone.now())
        progress.published.append(market_id)
        _still_claimed(policy, policy.checkpoint(progress))
        moved = True
