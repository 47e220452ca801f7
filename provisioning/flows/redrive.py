"""Redrive (SPEC §13.2): a new onboarding of the items of an ended one that failed or were
cancelled, with the same brand data, begun through the onboarding's own bulk path
(`onboarding.onboarding_rows_write`, through the one begin's bulk form `begin.works_begin`:
one transaction, one INSERT per table, the chains published after commit).

An item resumes where the first run left it rather than starting over:

- its brand, created by the first run and still there, is not created again: the item's chain
  is an activate's on that brand (provision-workspace settling its workspace, then
  activate-markets creating or resuming each of its markets; a market already live costs no
  call). A brand without a workspace settles the candidate its last attempt created (cancelled
  or failed before promotion: emptied, its shell kept), unless that one ended terminal or is
  another brand's now; with none, it creates or adopts one by name as a create does. Its
  pending attempt is begun as the guard begins one (the brand rows locked in primary-key
  order, then `works_begin`; a brand with work in progress fails the item at once,
  `semrush_provisioning_in_progress`).
- an item that had no brand (refused at accept) or whose brand was deleted since is a brand
  create again (and `brandExists` again if the name is still taken).

Items that completed are not part of the redrive: they cost no upstream call.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from jobs.models import JobStep
from kernel import context
from provisioning import selectors, services
from provisioning.exceptions import (
    NothingToRetryError,
    OnboardingInProgressError,
    ProvisioningInProgressError,
)
from provisioning.flows.begin import Chained, Work
from provisioning.flows.onboarding import (
    ItemRows,
    OnboardingBrand,
    brand_of_input,
    item_refs,
    names_taken,
    onboarding_allowed_check,
    onboarding_rows_write,
)
from provisioning.guard import organization_onboarding_lock
from provisioning.models import (
    AttemptReason,
    AttemptStartedBy,
    AttemptStatus,
    Onboarding,
    OnboardingItem,
    ProvisioningAttempt,
)
from serenity.models import Brand, BrandStatus, Organization
from serenity.names import brand_name_key

# `maxFailedItems` left out of a redrive's request: the original's threshold holds.
SAME_THRESHOLD: Any = object()


def onboarding_redrive(
    *, onboarding: Onboarding, max_failed_items: int | None = SAME_THRESHOLD
) -> Onboarding:
    """Begin the redrive of `onboarding` (its failed and cancelled items, in index order) and
    answer the new onboarding (`retry_of` the original). Raises `OnboardingInProgressError`
    while the original, or an earlier redrive of it, runs; `NothingToRetryError` when no item
    failed or was cancelled; the accept's errors (`SerenityNotEnabledError`, the org's cap of
    open items). Holds the org's onboarding lock, then the items' brand rows (pk order)."""
    organization = onboarding.organization
    onboarding_allowed_check(organization)
    with transaction.atomic():
        organization_onboarding_lock(organization.pk)
        original = Onboarding.objects.get(pk=onboarding.pk)
        running = (
            original
            if original.completed_at is None
            else Onboarding.objects.filter(retry_of=original, completed_at__isnull=True).first()
        )
        if running is not None:
            raise OnboardingInProgressError(details={"onboardingId": str(running.pk)})
        items = selectors.onboarding_items_to_retry(original)
        if not items:
            raise NothingToRetryError()
        redrive = Onboarding(
            organization=organization,
            total=len(items),
            retry_of=original,
            max_failed_items=(
                original.max_failed_items
                if max_failed_items is SAME_THRESHOLD
                else max_failed_items
            ),
            **context.actor_fields("started"),
        )
        rows = _rows(organization, redrive, items)
        onboarding_rows_write(redrive, rows)
    return redrive


def _rows(organization: Organization, redrive: Onboarding, items: list[OnboardingItem]) -> ItemRows:
    brands = _brands_lock([item.brand_id for item in items if item.brand_id is not None])
    busy = _busy(list(brands))
    asked = [brand_of_input(item.name, selectors.onboarding_item_input(item)) for item in items]
    fresh = [
        brand_name_key(a.name)
        for item, a in zip(items, asked, strict=True)
        if item.brand_id not in brands
    ]
    taken = names_taken(organization, fresh)
    candidates = _candidates_left([b for b in brands.values() if not b.semrush_sub_workspace_id])
    rows = ResumeRows()
    for index, (item, brand_asked) in enumerate(zip(items, asked, strict=True)):
        brand = brands.get(item.brand_id) if item.brand_id is not None else None
        if brand is not None and brand.pk in busy:
            rows.refused(redrive, index, brand_asked, ProvisioningInProgressError())
        elif brand is not None:
            rows.resume(redrive, index, brand_asked, brand, candidates.get(brand.pk))
        elif (key := brand_name_key(brand_asked.name)) in taken:
            rows.refused(redrive, index, brand_asked)
        else:
            taken.add(key)
            rows.add(redrive, organization, index, brand_asked)
    return rows


def _busy(brand_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """The brands with a live pending attempt; a stale one (nothing drives it any more) is
    reconciled as the guard reconciles it, and its brand is free."""
    busy = set()
    for attempt in ProvisioningAttempt.objects.filter(
        brand_id__in=brand_ids, status=AttemptStatus.PENDING
    ):
        if attempt.updated_at is not None and services.attempt_is_stale(attempt_id=attempt.id):
            services.attempt_reconcile_stale(attempt=attempt)
        else:
            busy.add(attempt.brand_id)
    return busy


def _brands_lock(brand_ids: list[uuid.UUID]) -> dict[uuid.UUID, Brand]:
    """The items' brands that are still there, locked in primary-key order (as the guard
    locks one): no other begin can slip a pending attempt in before ours are written."""
    locked = (
        Brand.objects.select_for_update()
        .filter(pk__in=brand_ids)
        .exclude(status=BrandStatus.DELETED)
        .order_by("pk")
    )
    return {brand.pk: brand for brand in locked}


def _candidates_left(brands: list[Brand]) -> dict[uuid.UUID, str]:
    """Of these brands without a workspace, the candidate each one's latest attempt recorded,
    where it may be settled again: not terminal, and no brand's pointer."""
    latest: dict[uuid.UUID, tuple[str | None, str | None]] = {}
    # Newest first: the first row seen of a brand is its latest attempt (a few per brand).
    for brand_id, candidate, reason in (
        ProvisioningAttempt.objects.filter(brand__in=brands)
        .order_by("-created_at")
        .values_list("brand_id", "candidate_workspace_id", "reason")
    ):
        latest.setdefault(brand_id, (candidate, reason))
    found = {
        brand_id: candidate
        for brand_id, (candidate, reason) in latest.items()
        if candidate and reason != AttemptReason.TERMINAL
    }
    pointed = set(
        Brand.objects.filter(semrush_sub_workspace_id__in=list(found.values())).values_list(
            "semrush_sub_workspace_id", flat=True
        )
    )
    return {brand_id: c for brand_id, c in found.items() if c not in pointed}


class ResumeRows(ItemRows):
    """An onboarding's item rows, and those of items resumed on a brand the first run created."""

    def resume(
        self,
        redrive: Onboarding,
        index: int,
        item: OnboardingBrand,
        brand: Brand,
        candidate: str | None,
    ) -> None:
        """The item's chain is an activate's on the existing brand: provision-workspace settles
        its workspace (the pointer, as an activate; else `candidate`, as a create that had
        recorded it; else create-or-adopt by name), then activate-markets creates or resumes
        each market asked for."""
        pointer = brand.semrush_sub_workspace_id
        work = Work(
            brand=brand,
            # An activate stands down when the pointer it settles changes; a brand without one
            # is provisioned as its create was.
            started_by=AttemptStartedBy.ACTIVATE if pointer else AttemptStartedBy.CREATE_BRAND,
            chained=_resumed_chained(brand, item),
            refs=item_refs(redrive, index),
            candidate=pointer or candidate,
        )
        # The brand's own name is the item's: the group's shared family listing matches
        # workspaces by it.
        self.begun(redrive, index, item, work)


def _resumed_chained(brand: Brand, item: OnboardingBrand) -> Chained:
    """The resumed item's step after provision-workspace: activate-markets with its markets
    (a pending brand flipped `active` first), the flip alone for a pending brand without
    markets, nothing for an active one."""
    was_pending = brand.status == BrandStatus.PENDING
    if item.markets:
        markets = [plan.as_metadata() for plan in item.markets]
        return [(JobStep.ACTIVATE_MARKETS, {"markets": markets, "wasPending": was_pending})]
    if was_pending:
        return [(JobStep.ACTIVATE_BRAND_WORKSPACE, {"wasPending": True})]
    return []
