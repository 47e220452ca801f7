"""The database enforces SPEC §3's invariants on PostgreSQL: one pending attempt per brand,
unique live brand names per org, a unique sub-workspace pointer, one live market per slice."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from provisioning.models import ProvisioningAttempt
from serenity.models import Brand, Market, MarketStatus
from tests.factories import (
    BrandFactory,
    MarketFactory,
    OrganizationFactory,
    ProvisioningAttemptFactory,
)


@pytest.fixture(autouse=True)
def _on_postgresql(db):  # type: ignore[no-untyped-def]
    # These tests prove the constraints of the production database; never skip them.
    assert connection.vendor == "postgresql"


def _attempt(brand: Brand, status: str = "pending") -> ProvisioningAttempt:
    return ProvisioningAttemptFactory(brand=brand, status=status)


# --- one pending attempt per brand -------------------------------------------------------------


def test_second_pending_attempt_for_one_brand_is_refused():
    # given
    brand = BrandFactory()
    first = _attempt(brand)
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        _attempt(brand)
    assert list(ProvisioningAttempt.objects.filter(brand=brand).values_list("id", flat=True)) == [
        first.id
    ]


def test_conditional_update_back_to_pending_is_refused_while_another_is_pending():
    # given
    brand = BrandFactory()
    old = _attempt(brand, status="failed")
    _attempt(brand)
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        ProvisioningAttempt.objects.filter(pk=old.pk).update(status="pending")
    assert ProvisioningAttempt.objects.get(pk=old.pk).status == "failed"


@pytest.mark.parametrize("status", ["failed", "ready"])
def test_finished_attempts_beside_a_pending_one_are_fine(status):
    # given
    brand = BrandFactory()
    _attempt(brand)
    # when
    _attempt(brand, status=status)
    _attempt(brand, status=status)
    # then
    assert ProvisioningAttempt.objects.filter(brand=brand).count() == 3


def test_pending_attempts_of_two_brands_are_fine():
    # given
    first, second = BrandFactory(), BrandFactory()
    # when
    _attempt(first)
    _attempt(second)
    # then
    assert ProvisioningAttempt.objects.filter(status="pending").count() == 2


def test_a_new_pending_attempt_after_the_previous_one_finished_is_fine():
    # given
    brand = BrandFactory()
    first = _attempt(brand)
    ProvisioningAttempt.objects.filter(pk=first.pk, status="pending").update(
        status="failed", reason="cancelled"
    )
    # when
    second = _attempt(brand)
    # then
    assert ProvisioningAttempt.objects.get(brand=brand, status="pending") == second


# --- brand name unique per org among non-deleted brands (trimmed, case-insensitive) -----------


@pytest.mark.parametrize("clash", ["Acme", "acme", "  ACME ", "acme  "])
def test_same_brand_name_in_one_org_is_refused(clash):
    # given
    org = OrganizationFactory()
    BrandFactory(organization=org, name="Acme")
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        BrandFactory(organization=org, name=clash)
    assert Brand.objects.filter(organization=org).count() == 1


def test_same_brand_name_in_another_org_is_fine():
    # given
    BrandFactory(name="Acme")
    # when
    BrandFactory(name="acme")
    # then
    assert Brand.objects.filter(name__iexact="acme").count() == 2


def test_a_deleted_brand_does_not_hold_its_name():
    # given
    org = OrganizationFactory()
    BrandFactory(organization=org, name="Acme", status="deleted")
    BrandFactory(organization=org, name="ACME", status="deleted")
    # when
    BrandFactory(organization=org, name="acme", status="pending")
    # then
    assert Brand.objects.filter(organization=org).count() == 3


def test_undeleting_into_a_taken_name_is_refused():
    # given
    org = OrganizationFactory()
    gone = BrandFactory(organization=org, name="Acme", status="deleted")
    BrandFactory(organization=org, name="Acme")
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        Brand.objects.filter(pk=gone.pk).update(status="active")


# --- the sub-workspace pointer is unique across all brands --------------------------------------


def test_two_brands_cannot_point_at_one_workspace_even_across_orgs():
    # given
    BrandFactory(semrush_sub_workspace_id="ws-1")
    other = BrandFactory()
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        Brand.objects.filter(pk=other.pk).update(semrush_sub_workspace_id="ws-1")
    assert Brand.objects.get(pk=other.pk).semrush_sub_workspace_id is None


def test_many_brands_without_a_pointer_are_fine():
    # when
    BrandFactory.create_batch(3, semrush_sub_workspace_id=None)
    # then
    assert Brand.objects.filter(semrush_sub_workspace_id__isnull=True).count() == 3


# --- one non-deleted market per (brand, geoTargetId, languageCode) -----------------------------


def _market(brand: Brand, geo: int = 2840, lang: str = "en", **fields: object) -> Market:
    fields.setdefault("status", MarketStatus.CREATING)
    return MarketFactory(
        brand=brand, geo_target_id=geo, language_code=lang, name=f"{geo}-{lang}", **fields
    )


def test_second_live_market_on_one_slice_is_refused():
    # given
    brand = BrandFactory()
    _market(brand)
    # when / then
    with pytest.raises(IntegrityError), transaction.atomic():
        _market(brand, status="draft")
    assert Market.objects.filter(brand=brand).count() == 1


def test_tombstoned_markets_do_not_hold_the_slice():
    # given
    brand = BrandFactory()
    _market(brand, deleted_at=timezone.now())
    _market(brand, deleted_at=timezone.now())
    # when
    _market(brand)
    # then
    assert Market.objects.filter(brand=brand, deleted_at__isnull=True).count() == 1


def test_other_slices_and_other_brands_are_fine():
    # given
    brand, other = BrandFactory(), BrandFactory()
    _market(brand)
    # when
    _market(brand, lang="de")
    _market(brand, geo=2276)
    _market(other)
    # then
    assert Market.objects.count() == 4
