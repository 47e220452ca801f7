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
parent's family once for the group (`workspace.family_shared`), the others use that listing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import services as job_services
from jobs.exceptions import JobFinishedError, JobNotCancellableError
from jobs.models import JobStatus, JobStep, JobType
from kernel import context
from provisioning import selectors, services
from provisioning.exceptions import OnboardingFinishedError
from provisioning.family import GROUP_KEY, ONBOARDING_KEY
from provisioning.flows.common import MarketPlan
from provisioning.models import (
    ONBOARDING_GROUP_SIZE,
    AttemptStartedBy,
    Onboarding,
    OnboardingItem,
    OnboardingStatus,
    ProvisioningAttempt,
)
from provisioning.signals import onboarding_ended
from serenity.exceptions import BrandExistsError, SerenityNotEnabledError
from serenity.models import Brand, BrandStatus, Market, MarketStatus, Organization, WorkspaceMode
from serenity.names import brand_name_key


@dataclass(frozen=True)
class OnboardingBrand:
    name: str
    base_url: str
    urls: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
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
    for _ in range(3):
        try:
            return _begin(organization=organization, brands=brands)
        except IntegrityError:
            continue  # a name was taken meanwhile: read the names again
    raise BrandExistsError()


def _begin(*, organization: Organization, brands: list[OnboardingBrand]) -> Onboarding:
    keys = [brand_name_key(b.name) for b in brands]
    with transaction.atomic():
        taken = set(
            Brand.objects.filter(organization=organization, name_key__in=keys)
            .exclude(status=BrandStatus.DELETED)
            .values_list("name_key", flat=True)
        )
        onboarding = Onboarding.objects.create(
            organization=organization, total=len(brands), **context.actor_fields("started")
        )
        rows = _Rows()
        for index, (item, key) in enumerate(zip(brands, keys, strict=True)):
            if key in taken:
                rows.refused(onboarding, index, item.name)
                continue
            taken.add(key)
            rows.add(onboarding, organization, index, item, key)
        rows.write()
        if not rows.chains:
            # Every item was refused at once: nothing will end later.
            onboarding_complete_if_ended(onboarding)
    return onboarding


class _Rows:
    """The rows of an onboarding's items, written with one INSERT per table."""

    def __init__(self) -> None:
        self.brands: list[Brand] = []
        self.attempts: list[ProvisioningAttempt] = []
        self.markets: list[Market] = []
        self.chains: list[job_services.ChainSpec] = []
        self.items: list[OnboardingItem] = []

    def refused(self, onboarding: Onboarding, index: int, name: str) -> None:
        error = BrandExistsError()
        self.items.append(
            OnboardingItem(
                onboarding=onboarding,
                index=index,
                name=name,
                error={"code": error.code, "message": error.message, "retryable": False},
            )
        )

    def add(
        self,
        onboarding: Onboarding,
        organization: Organization,
        index: int,
        item: OnboardingBrand,
        key: str,
    ) -> None:
        brand = Brand(
            id=uuid.uuid4(),
            organization=organization,
            name=item.name.strip(),
            name_key=key,
            workspace_mode=organization.workspace_mode,
            status=BrandStatus.ACTIVE,
            base_url=item.base_url,
            urls=item.urls,
            aliases=item.aliases,
        )
        root_id = uuid.uuid4()
        attempt = ProvisioningAttempt(
            id=uuid.uuid4(),
            brand=brand,
            started_by=AttemptStartedBy.CREATE_BRAND,
            job_id=root_id,
            **context.actor_fields("started"),
        )
        refs: dict[str, Any] = {
            "attemptId": str(attempt.id),
            ONBOARDING_KEY: str(onboarding.id),
            GROUP_KEY: index // ONBOARDING_GROUP_SIZE,
        }
        then = self._chained(brand, attempt, item.markets, refs)
        self.brands.append(brand)
        self.attempts.append(attempt)
        self.chains.append(
            job_services.ChainSpec(
                organization_id=organization.pk,
                brand_id=brand.pk,
                job_type=JobType.PROVISION_WORKSPACE,
                first=job_services.StepSpec(JobStep.PROVISION_WORKSPACE, refs),
                then=then,
                root_id=root_id,
            )
        )
        self.items.append(
            OnboardingItem(
                onboarding=onboarding, index=index, name=brand.name, brand=brand, job_id=root_id
            )
        )

    def _chained(
        self,
        brand: Brand,
        attempt: ProvisioningAttempt,
        markets: list[MarketPlan],
        refs: dict[str, Any],
    ) -> job_services.StepSpec | None:
        """The item's chained step: create-market on a reserved slice for one market (as a
        brand create with a market), activate-markets for several, none for none."""
        if len(markets) == 1:
            plan = markets[0]
            market = Market(
                id=uuid.uuid4(),
                brand=brand,
                geo_target_id=plan.slice.geo_target_id,
                language_code=plan.slice.language_code,
                name=plan.name or plan.slice.default_name,
                status=MarketStatus.CREATING,
                reserved_by=attempt.id,
            )
            self.markets.append(market)
            refs["marketId"] = str(market.pk)
            return job_services.StepSpec(JobStep.CREATE_MARKET, {**plan.as_metadata(), **refs})
        if markets:
            return job_services.StepSpec(
                JobStep.ACTIVATE_MARKETS,
                {"markets": [plan.as_metadata() for plan in markets], **refs},
            )
        return None

    def write(self) -> None:
        """Parents first; the jobs' and attempts' links to each other are checked at commit."""
        Brand.objects.bulk_create(self.brands)
        job_services.job_chains_create(self.chains)
        ProvisioningAttempt.objects.bulk_create(self.attempts)
        Market.objects.bulk_create(self.markets)
        OnboardingItem.objects.bulk_create(self.items)


def onboarding_cancel(*, onboarding: Onboarding) -> None:
    """Cancel every item that has not ended, as the cancel route cancels a chain (SPEC §6.6):
    before promotion the attempt fails `cancelled` and the chain is CANCELLED; after it, a
    chained job that has not started is CANCELLED; one that is running goes on and ends as it
    will. Idempotent while the onboarding is still in progress (a second cancel finds nothing
    left to cancel). Raises `OnboardingFinishedError` for an onboarding that has ended
    (COMPLETED or CANCELLED, SPEC §12.2): nothing changes.

    The cancel mark is a conditional write on an onboarding that has not ended; the completion
    (`onboarding_complete_if_ended`) is conditional on the same row, so of a cancel and a last
    item's end racing, the first write decides the onboarding's status."""
    now = timezone.now()
    marked = Onboarding.objects.filter(
        pk=onboarding.pk, completed_at__isnull=True, cancelled_at__isnull=True
    ).update(cancelled_at=now, updated_at=now)
    if (
        not marked
        and Onboarding.objects.filter(pk=onboarding.pk, completed_at__isnull=False).exists()
    ):
        raise OnboardingFinishedError()
    unfinished = (
        OnboardingItem.objects.filter(onboarding=onboarding, job__isnull=False)
        .filter(job__current__status=JobStatus.IN_PROGRESS)
        .values_list("brand_id", "job_id")
    )
    for brand_id, job_id in unfinished:
        if brand_id is None or job_id is None:
            continue
        try:
            services.job_cancel(brand_id=brand_id, job_id=job_id)
        except (JobFinishedError, JobNotCancellableError):
            continue  # it ended meanwhile, or its chained work is running: it ends on its own


def onboarding_chain_ended(sender: Any, *, metadata: dict[str, Any], **_: Any) -> None:
    """`jobs.signals.chain_ended` receiver: an onboarding item's chain ended, so the onboarding
    changed (`updatedAt` moves); when it was the last of its onboarding to end, the onboarding
    ends (once: a conditional write) and `onboarding_ended` is sent, in the ending's
    transaction."""
    onboarding_id = metadata.get(ONBOARDING_KEY)
    if onboarding_id is None:
        return
    Onboarding.objects.filter(pk=onboarding_id).update(updated_at=timezone.now())
    onboarding = Onboarding.objects.filter(pk=onboarding_id).first()
    if onboarding is not None:
        onboarding_complete_if_ended(onboarding)


def onboarding_complete_if_ended(onboarding: Onboarding) -> None:
    """Once every item has ended: record the end (`completed_at`, the document's `finishedAt`)
    and send `onboarding_ended` with the final summary, COMPLETED or CANCELLED. A COMPLETED end
    is written only if no cancel landed first; when one did, the summary is read again (then
    CANCELLED)."""
    for _ in range(2):
        summary = selectors.onboarding_summary(onboarding)
        if summary.status == OnboardingStatus.IN_PROGRESS:
            return
        ending = Onboarding.objects.filter(pk=onboarding.pk, completed_at__isnull=True)
        if summary.status == OnboardingStatus.COMPLETED:
            ending = ending.filter(cancelled_at__isnull=True)
        now = timezone.now()
        if ending.update(completed_at=now, updated_at=now):
            onboarding.completed_at = onboarding.updated_at = now
            ended = replace(summary, updated_at=now, finished_at=now)
            onboarding_ended.send(sender=Onboarding, onboarding=onboarding, summary=ended)
            return
        onboarding.refresh_from_db()
        if onboarding.completed_at is not None:
            return  # ended by another transaction
