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

from jobs.models import AsyncJob, JobStatus, JobStep
from kernel import context
from kernel.errors import DomainError
from provisioning import selectors
from provisioning.caps import queued_markets_check
from provisioning.exceptions import OnboardingLimitError
from provisioning.family import GROUP_KEY, ONBOARDING_KEY
from provisioning.flows.begin import BrandFields, Chained, Work, brand_row, works_begin
from provisioning.flows.common import MarketPlan
from provisioning.flows.onboarding_cancel import (
    chains_cancel,
    threshold_cancel_schedule,
    threshold_mark,
)
from provisioning.guard import organization_onboarding_lock
from provisioning.models import (
    ONBOARDING_GROUP_SIZE,
    AttemptStartedBy,
    Onboarding,
    OnboardingItem,
)
from provisioning.signals import onboarding_ended
from serenity.exceptions import BrandExistsError, SerenityNotEnabledError
from serenity.models import Brand, BrandStatus, Organization, WorkspaceMode
from serenity.names import brand_name_key


@dataclass(frozen=True, kw_only=True)
class OnboardingBrand(BrandFields):
    markets: list[MarketPlan] = field(default_factory=list)


def onboarding_begin(
    *,
    organization: Organization,
    brands: list[OnboardingBrand],
    max_failed_items: int | None = None,
) -> Onboarding:
    """Accept the onboarding: every row of every item in one transaction (retried once when a
    concurrent create took one of the names between the read and the insert). Raises
    `SerenityNotEnabledError` for an org that is not a Serenity org in sub-workspace mode.
    `max_failed_items`: the failure threshold (SPEC §13.2), None for none."""
    onboarding_allowed_check(organization)
    onboarding_markets_check(sum(len(b.markets) for b in brands))
    for _ in range(3):
        try:
            return _begin(
                organization=organization, brands=brands, max_failed_items=max_failed_items
            )
        except IntegrityError:
            continue  # a name was taken meanwhile: read the names again
    raise BrandExistsError()


def onboarding_markets_check(markets: int) -> None:
    """429 `onboardingLimit` for an onboarding of more markets in all than the setting allows
    (the API checks a body's count before validating its members: SPEC §13.6)."""
    if markets > settings.SERENITY_ONBOARDING_MARKETS_MAX:
        raise _limit_error(
            f"An onboarding holds at most {settings.SERENITY_ONBOARDING_MARKETS_MAX} markets "
            f"in all; this one has {markets}."
        )


def onboarding_allowed_check(organization: Organization) -> None:
    """Raises `SerenityNotEnabledError` for an org that is not a Serenity org in sub-workspace
    mode (an onboarding's accept, and its redrive's)."""
    if (
        not organization.is_serenity_org
        or organization.workspace_mode != WorkspaceMode.SUBWORKSPACE
    ):
        raise SerenityNotEnabledError(
            "Bulk onboarding needs a Serenity organization with a parent workspace in "
            "sub-workspace mode."
        )


def brand_input_of(item: OnboardingBrand) -> dict[str, Any]:
    """What an item keeps of its request (`OnboardingItem.brand_input`)."""
    return {
        "baseUrl": item.base_url,
        "urls": item.urls,
        "aliases": item.aliases,
        "markets": [plan.as_metadata() for plan in item.markets],
    }


def brand_of_input(name: str, brand_input: dict[str, Any]) -> OnboardingBrand:
    """The item again, from what it kept (a redrive begins it as it was asked)."""
    return OnboardingBrand(
        name=name,
        base_url=brand_input["baseUrl"],
        urls=list(brand_input.get("urls") or []),
        aliases=list(brand_input.get("aliases") or []),
        markets=[MarketPlan.from_metadata(m) for m in brand_input.get("markets") or []],
    )


def _limit_error(message: str) -> OnboardingLimitError:
    return OnboardingLimitError(
        message, retry_after=settings.SERENITY_ONBOARDING_LIMIT_RETRY_SECONDS
    )


def open_items_check(*, organization: Organization, adding: int) -> None:
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


def _begin(
    *, organization: Organization, brands: list[OnboardingBrand], max_failed_items: int | None
) -> Onboarding:
    keys = [brand_name_key(b.name) for b in brands]
    with transaction.atomic():
        organization_onboarding_lock(organization.pk)
        taken = names_taken(organization, keys)
        onboarding = Onboarding(
            organization=organization,
            total=len(brands),
            max_failed_items=max_failed_items,
            **context.actor_fields("started"),
        )
        rows = ItemRows()
        for index, (item, key) in enumerate(zip(brands, keys, strict=True)):
            if key in taken:
                rows.refused(onboarding, index, item)
                continue
            taken.add(key)
            rows.add(onboarding, organization, index, item)
        onboarding_rows_write(onboarding, rows)
    return onboarding


def names_taken(organization: Organization, keys: list[str]) -> set[str]:
    """Which of these name keys a brand of the org (not deleted) holds now."""
    return set(
        Brand.objects.filter(organization=organization, name_key__in=keys)
        .exclude(status=BrandStatus.DELETED)
        .values_list("name_key", flat=True)
    )


def onboarding_rows_write(onboarding: Onboarding, rows: ItemRows) -> None:
    """The one bulk path that begins an onboarding's items (its accept, and a redrive's,
    `flows.redrive`): inside the caller's transaction, holding the org's onboarding lock, the
    cap of open items checked, the onboarding and every row written with one INSERT per table
    (`begin.works_begin`; the chains published after commit). An onboarding that has nothing
    left to run ends now, and one whose items refused at once reach its threshold is cancelled
    now."""
    begun = len(rows.works)
    open_items_check(organization=onboarding.organization, adding=begun)
    queued_markets_check(organization_id=onboarding.organization_id, adding=rows.queued_markets)
    onboarding.in_progress = begun
    onboarding.failed = len(rows.items) - begun
    onboarding.save(force_insert=True)
    roots = rows.write()
    if not roots:
        # Every item was refused at once: nothing will end later.
        onboarding_complete_if_ended(onboarding)
    elif threshold_mark(onboarding.pk):
        # Its refusals alone reach the threshold: nothing has started, nobody else sees the
        # rows yet, so the rest is cancelled in this transaction (no upstream call).
        chains_cancel(root_ids=roots)


def item_refs(onboarding: Onboarding, index: int) -> dict[str, Any]:
    """What every job of an item's chain carries besides its attempt: its onboarding and its
    group."""
    return {ONBOARDING_KEY: str(onboarding.id), GROUP_KEY: index // ONBOARDING_GROUP_SIZE}


class ItemRows:
    """The rows of an onboarding's items: each item's work begun with the others
    (`begin.works_begin`: one INSERT per table), and the items."""

    def __init__(self) -> None:
        self.works: list[Work] = []
        self.items: list[OnboardingItem] = []
        self.queued_markets = 0  # the accepted items' markets (provisioning.caps)

    def refused(
        self,
        onboarding: Onboarding,
        index: int,
        item: OnboardingBrand,
        error: DomainError | None = None,
    ) -> None:
        """An item that ends FAILED at once (`brandExists` unless `error` says otherwise)."""
        error = error or BrandExistsError()
        self.items.append(
            OnboardingItem(
                onboarding=onboarding,
                index=index,
                name=item.name,
                error={"code": error.code, "message": error.message, "retryable": False},
                ended_status=JobStatus.FAILED,
                brand_input=brand_input_of(item),
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
        self.queued_markets += len(markets)
        work = Work(
            brand=brand,
            started_by=AttemptStartedBy.CREATE_BRAND,
            chained=chained,
            market=markets[0] if len(markets) == 1 else None,
            brand_is_new=True,
            refs=item_refs(onboarding, index),
        )
        self.begun(onboarding, index, item, work)

    def begun(self, onboarding: Onboarding, index: int, item: OnboardingBrand, work: Work) -> None:
        """An item begun by `work` (on its brand): its work and its item row."""
        self.works.append(work)
        self.items.append(
            OnboardingItem(
                onboarding=onboarding,
                index=index,
                name=work.brand.name,
                brand=work.brand,
                brand_input=brand_input_of(item),
            )
        )

    def write(self) -> list[uuid.UUID]:
        """The works (parents first), then the items, each with its chain's root. Returns the
        roots."""
        roots = {begun.work.brand.pk: begun.job.pk for begun in works_begin(self.works)}
        for item in self.items:
            if item.brand is not None:
                item.job_id = roots[item.brand.pk]
        OnboardingItem.objects.bulk_create(self.items)
        return list(roots.values())


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
    elif JobStatus.FAILED in per_status and threshold_mark(onboarding_id):
        threshold_cancel_schedule(onboarding_id)


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
