"""Bulk onboarding (SPEC §11.2): a thousand brand creates accepted in one request.

Each item is a brand create with its markets, exactly as a single async create is: its brand
row (status `active`), its pending attempt, its market reservation and its chain
(provision-workspace → create-market for one market, → activate-markets for several, nothing
more for none), with the guard, the quota and its fairness, cancellation and crash recovery of
single requests. All of them are written in one transaction with the onboarding and its items
(a few bulk INSERTs whatever the number of brands), and the chains are published after commit.

An item whose name exists already in the org, or repeats an earlier item's name, is refused at
once (`brandExists`, recorded on the item): it touches neither Semrush nor the other items.

Shared reads: the items are grouped by ten (by index); the first of a group to run lists the
parent's family once for the group (`family.family_shared`), the others use that listing; the
onboarding's status reads due around the same time are answered by one family listing too
(`family.family_status_shared`, SPEC §12.5).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from jobs import services as job_services
from jobs.models import AsyncJob, JobStatus, JobStep
from jobs.signals import chains_ended_check
from kernel import context
from provisioning import selectors, services
from provisioning.exceptions import OnboardingFinishedError, OnboardingLimitError
from provisioning.family import GROUP_KEY, ONBOARDING_KEY
from provisioning.flows.begin import BrandFields, Chained, Work, brand_row, works_begin_new
from provisioning.flows.common import MarketPlan
from provisioning.guard import attempts_lock, organization_onboarding_lock
from provisioning.models import (
    ONBOARDING_GROUP_SIZE,
    AttemptReason,
    AttemptStartedBy,
    AttemptStatus,
    Onboarding,
    OnboardingItem,
    ProvisioningAttempt,
)
from provisioning.signals import onboarding_ended
from serenity.exceptions import BrandExistsError, SerenityNotEnabledError
from serenity.models import Brand, BrandStatus, Market, MarketStatus, Organization, WorkspaceMode
from serenity.names import brand_name_key


@dataclass(frozen=True, kw_only=True)
class OnboardingBrand(BrandFields):
    markets: list[MarketPlan] = field(default_factory=list)


def onboarding_begin(*, organization: Organization, brands: list[OnboardingBrand]) -> Onboarding:
    """Accept the onboarding: every row of every item in one transaction (retried once when a
    concurrent create took one of the names between the read and the insert). Raises
    `SerenityNotEnabledError` for an org that is not a Serenity org in sub-workspace mode."""
    if (
        not organization.is_serenity_org
        or organization.workspace_mode != WorkspaceMode.SUBWORKSPACE
    ):
        raise SerenityNotEnabledError(
            "Bulk onboarding needs a Serenity organization with a parent workspace in "
            "sub-workspace mode."
        )
    markets = sum(len(b.markets) for b in brands)
    if markets > settings.SERENITY_ONBOARDING_MARKETS_MAX:
        raise _limit_error(
            f"An onboarding holds at most {settings.SERENITY_ONBOARDING_MARKETS_MAX} markets "
            f"in all; this one has {markets}."
        )
    for _ in range(3):
        try:
            return _begin(organization=organization, brands=brands)
        except IntegrityError:
            continue  # a name was taken meanwhile: read the names again
    raise BrandExistsError()


def _limit_error(message: str) -> OnboardingLimitError:
    return OnboardingLimitError(
        message, retry_after=settings.SERENITY_ONBOARDING_LIMIT_RETRY_SECONDS
    )


def _open_items_check(*, organization: Organization, adding: int) -> None:
    """Raises `OnboardingLimitError` when `adding` more open items would take the org past its
    cap (its own `onboarding_open_items_max`, else the setting). The caller holds the org's
    onboarding lock, so a concurrent accept cannot slip in between the sum and the insert."""
    cap = organization.onboarding_open_items_max
    if cap is None:
        cap = settings.SERENITY_ONBOARDING_OPEN_ITEMS_MAX
    open_items = (
        Onboarding.objects.filter(organization=organization, completed_at__isnull=True)
        .order_by()
        .aggregate(n=Sum("in_progress"))["n"]
        or 0
    )
    if open_items + adding > cap:
        raise _limit_error(
            f"The organization may have at most {cap} onboarding items in progress; "
            f"{open_items} are, and this onboarding adds {adding}."
        )


def _begin(*, organization: Organization, brands: list[OnboardingBrand]) -> Onboarding:
    keys = [brand_name_key(b.name) for b in brands]
    with transaction.atomic():
        organization_onboarding_lock(organization.pk)
        taken = set(
            Brand.objects.filter(organization=organization, name_key__in=keys)
            .exclude(status=BrandStatus.DELETED)
            .values_list("name_key", flat=True)
        )
        onboarding = Onboarding(
            organization=organization, total=len(brands), **context.actor_fields("started")
        )
        rows = _Rows()
        for index, (item, key) in enumerate(zip(brands, keys, strict=True)):
            if key in taken:
                rows.refused(onboarding, index, item.name)
                continue
            taken.add(key)
            rows.add(onboarding, organization, index, item)
        _open_items_check(organization=organization, adding=rows.begun)
        onboarding.in_progress = rows.begun
        onboarding.failed = len(rows.items) - rows.begun
        onboarding.save(force_insert=True)
        rows.write()
        if not rows.begun:
            # Every item was refused at once: nothing will end later.
            onboarding_complete_if_ended(onboarding)
    return onboarding


class _Rows:
    """The rows of an onboarding's items: each item's work begun with the others
    (`begin.works_begin_new`: one INSERT per table), and the items."""

    def __init__(self) -> None:
        self.works: list[Work] = []
        self.items: list[OnboardingItem] = []

    @property
    def begun(self) -> int:
        return len(self.works)

    def refused(self, onboarding: Onboarding, index: int, name: str) -> None:
        error = BrandExistsError()
        self.items.append(
            OnboardingItem(
                onboarding=onboarding,
                index=index,
                name=name,
                error={"code": error.code, "message": error.message, "retryable": False},
                ended_status=JobStatus.FAILED,
            )
        )

    def add(
        self, onboarding: Onboarding, organization: Organization, index: int, item: OnboardingBrand
    ) -> None:
        """An item's work: a brand create with its markets, as a single async create is:
        create-market on a reserved slice for one market, activate-markets for several, no
        chained step for none."""
        brand = brand_row(organization=organization, fields=item, status=BrandStatus.ACTIVE)
        markets = item.markets
        chained: Chained = []
        if len(markets) == 1:
            chained = [(JobStep.CREATE_MARKET, markets[0].as_metadata())]
        elif markets:
            chained = [(JobStep.ACTIVATE_MARKETS, {"markets": [p.as_metadata() for p in markets]})]
        self.works.append(
            Work(
                brand=brand,
                started_by=AttemptStartedBy.CREATE_BRAND,
                chained=chained,
                market=markets[0] if len(markets) == 1 else None,
                brand_is_new=True,
                refs={
                    ONBOARDING_KEY: str(onboarding.id),
                    GROUP_KEY: index // ONBOARDING_GROUP_SIZE,
                },
            )
        )
        self.items.append(
            OnboardingItem(onboarding=onboarding, index=index, name=brand.name, brand=brand)
        )

    def write(self) -> None:
        """The works (parents first), then the items, each with its chain's root."""
        roots = {begun.work.brand.pk: begun.job.pk for begun in works_begin_new(self.works)}
        for item in self.items:
            if item.brand is not None:
                item.job_id = roots[item.brand.pk]
        OnboardingItem.objects.bulk_create(self.items)


def onboarding_cancel(*, onboarding: Onboarding) -> None:
    """Cancel every item that has not ended, as the cancel route cancels a chain (SPEC §6.6),
    with set-based writes whatever the number of items (SPEC §12.4): before promotion the
    attempt fails `cancelled` and the chain is CANCELLED; after it, a chained job that has not
    started is CANCELLED; one that is running goes on and ends as it will. The items that
    ended are counted, and `chains_ended` sent for them, in the same transaction. Raises
    `OnboardingFinishedError` for an onboarding that has ended (COMPLETED or CANCELLED, SPEC
    §12.2): nothing changes.

    The cancel mark is a conditional write on an onboarding that has not ended, committed on
    its own (so the onboarding's row is not held while the items' rows are locked: an item's
    ending locks its job, then the onboarding); the completion (`onboarding_complete_if_ended`)
    is conditional on the same row, so of a cancel and a last item's end racing, the first
    write decides the onboarding's status. Idempotent while the onboarding is in progress: a
    second cancel cancels whatever the first left (nothing, unless it failed halfway)."""
    now = timezone.now()
    marked = Onboarding.objects.filter(
        pk=onboarding.pk, completed_at__isnull=True, cancelled_at__isnull=True
    ).update(cancelled_at=now, updated_at=now)
    if (
        not marked
        and Onboarding.objects.filter(pk=onboarding.pk, completed_at__isnull=False).exists()
    ):
        raise OnboardingFinishedError()
    with transaction.atomic():
        roots = list(
            OnboardingItem.objects.filter(
                onboarding=onboarding, ended_status__isnull=True, job__isnull=False
            ).values_list("job_id", flat=True)
        )
        _chains_cancel(root_ids=roots)


def _chains_cancel(*, root_ids: list[uuid.UUID]) -> None:
    """`services.job_cancel` for many brand-create chains, in a fixed number of statements.
    Only an attempt with a candidate recorded gets its cleanup scheduled now; one whose
    candidate a running step is creating is emptied by the sweep (`attempts_needing_cleanup`)
    as any failed attempt's."""
    attempts = attempts_lock(root_ids)
    before = [a for a in attempts if not a.workspace_promoted]
    after = [a for a in attempts if a.workspace_promoted]
    now = timezone.now()
    ProvisioningAttempt.objects.filter(
        pk__in=[a.pk for a in before], status=AttemptStatus.PENDING
    ).update(
        status=AttemptStatus.FAILED,
        reason=AttemptReason.CANCELLED,
        error="Provisioning was cancelled.",
        updated_at=now,
        finished_at=now,
        **context.actor_fields("cancelled"),
    )
    job_services.chains_cancel(root_ids=[a.job_id for a in before if a.job_id])
    for attempt in before:
        if attempt.candidate_workspace_id:
            services.schedule_cleanup(attempt_id=attempt.pk)
    changed = job_services.chains_cancel(
        root_ids=[a.job_id for a in after if a.job_id], only_unstarted=True
    )
    ready = [a.pk for a in after if a.job_id in changed]
    ProvisioningAttempt.objects.filter(pk__in=ready, status=AttemptStatus.PENDING).update(
        status=AttemptStatus.READY, reason=None, error=None, updated_at=now, finished_at=now
    )
    Market.objects.filter(
        reserved_by__in=[a.pk for a in before] + ready,
        status=MarketStatus.CREATING,
        semrush_project_id=None,
    ).delete()
    chains_ended_check(root_ids=root_ids)


def onboarding_chain_ended(
    sender: Any, *, root_id: uuid.UUID, status: str, metadata: dict[str, Any], **_: Any
) -> None:
    """`jobs.signals.chain_ended` receiver: an onboarding item's chain ended."""
    if ONBOARDING_KEY in metadata:
        _items_end(chains=[(root_id, status)])


def onboarding_chains_ended(sender: Any, *, jobs: list[AsyncJob], **_: Any) -> None:
    """`jobs.signals.chains_ended` receiver: the onboarding items among these chains ended."""
    _items_end(
        chains=[
            (job.root_id or job.id, job.status)
            for job in jobs
            if ONBOARDING_KEY in (job.metadata or {})
        ]
    )


def _items_end(*, chains: list[tuple[uuid.UUID, str]]) -> None:
    """Of the chains that ended (root id, effective status), those of onboarding items not
    counted yet are counted: one conditional UPDATE per onboarding and status (its row count
    is exact, so a chain seen ended twice is counted once), then the onboarding's counters
    move by as many (`updatedAt` with them) and an onboarding whose last item ended ends
    (`onboarding_complete_if_ended`), in the ending's transaction."""
    if not chains:
        return
    by_status: dict[str, list[uuid.UUID]] = {}
    for root_id, status in chains:
        by_status.setdefault(status, []).append(root_id)
    onboarding_ids = set(
        OnboardingItem.objects.filter(
            job_id__in=[root_id for root_id, _ in chains], ended_status__isnull=True
        ).values_list("onboarding_id", flat=True)
    )
    for onboarding_id in sorted(onboarding_ids):
        ended = {
            status: OnboardingItem.objects.filter(
                onboarding_id=onboarding_id, job_id__in=roots, ended_status__isnull=True
            ).update(ended_status=status)
            for status, roots in by_status.items()
        }
        if any(ended.values()):
            _counts_move(onboarding_id, {status: n for status, n in ended.items() if n})


_COUNTERS = {
    JobStatus.COMPLETED: "completed",
    JobStatus.FAILED: "failed",
    JobStatus.CANCELLED: "cancelled",
}


def _counts_move(onboarding_id: uuid.UUID, per_status: dict[str, int]) -> None:
    ended = sum(per_status.values())
    counters = {
        _COUNTERS[JobStatus(status)]: F(_COUNTERS[JobStatus(status)]) + n
        for status, n in per_status.items()
    }
    Onboarding.objects.filter(pk=onboarding_id).update(
        in_progress=F("in_progress") - ended, updated_at=timezone.now(), **counters
    )
    onboarding = Onboarding.objects.get(pk=onboarding_id)
    if onboarding.in_progress == 0:
        onboarding_complete_if_ended(onboarding)


def onboarding_complete_if_ended(onboarding: Onboarding) -> None:
    """Once every item has ended (`in_progress` 0): record the end (`completed_at`, the
    document's `finishedAt`) and send `onboarding_ended` with the final summary, COMPLETED, or
    CANCELLED when a cancel landed first (both read from the row the conditional write
    ended)."""
    now = timezone.now()
    ending = Onboarding.objects.filter(pk=onboarding.pk, completed_at__isnull=True, in_progress=0)
    if not ending.update(completed_at=now, updated_at=now):
        return  # not every item has ended, or another transaction ended it
    onboarding.refresh_from_db()
    summary = selectors.onboarding_summary(onboarding)
    onboarding_ended.send(sender=Onboarding, onboarding=onboarding, summary=summary)
