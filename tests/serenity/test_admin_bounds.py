"""Admin (SPEC §12.4): the brand list shows and filters the provisioning status; webhook
deliveries are not mixed into the provisioning jobs list; an onboarding item shows its brand
once; an org's cap of open onboarding items is editable."""

from __future__ import annotations

import re

import pytest

from jobs.models import AsyncJob
from provisioning.models import AttemptReason, AttemptStatus, Onboarding, OnboardingItem
from serenity.services import organization_create
from tests.factories import (
    AsyncJobFactory,
    BrandFactory,
    OrganizationFactory,
    ProvisioningAttemptFactory,
)
from tests.serenity.test_admin import _org_form
from tests.serenity.test_admin import admin_client as admin_client

BRANDS = "/admin/serenity/brand/"
JOBS = "/admin/jobs/asyncjob/"


@pytest.fixture
def brands(db):  # type: ignore[no-untyped-def]
    """One brand in each provisioning status."""
    org = OrganizationFactory()
    pending = BrandFactory(organization=org, name="Pending brand")
    ProvisioningAttemptFactory(brand=pending)
    failed = BrandFactory(organization=org, name="Failed brand")
    ProvisioningAttemptFactory(
        brand=failed, status=AttemptStatus.FAILED, reason=AttemptReason.CANCELLED
    )
    ready = BrandFactory(organization=org, name="Ready brand", semrush_sub_workspace_id="ws-1")
    ProvisioningAttemptFactory(brand=ready, status=AttemptStatus.READY)
    BrandFactory(organization=org, name="Bare brand")
    return org


def _rows(page: str) -> dict[str, str]:
    """Brand name → its provisioning status column, from the change list."""
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    found = {}
    for row in rows:
        name = re.search(r'<th class="field-name"><a [^>]*>([^<]+)</a>', row)
        status = re.search(r'<td class="field-provisioning_status">([^<]*)</td>', row)
        if name and status:
            found[name.group(1)] = status.group(1)
    return found


def test_the_brand_list_shows_each_brand_s_provisioning_status(admin_client, brands):
    page = admin_client.get(BRANDS).content.decode()
    assert _rows(page) == {
        "Pending brand": "pending",
        "Failed brand": "failed",
        "Ready brand": "ready",
        "Bare brand": "—",
    }


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("pending", {"Pending brand"}),
        ("failed", {"Failed brand"}),
        ("ready", {"Ready brand"}),
        ("none", {"Bare brand"}),
    ],
)
def test_the_brand_list_filters_on_the_provisioning_status(admin_client, brands, value, names):
    page = admin_client.get(f"{BRANDS}?provisioning_status={value}").content.decode()
    assert set(_rows(page)) == names


def test_webhook_deliveries_are_not_in_the_jobs_list_unless_asked_for(admin_client):
    # given a provisioning chain and a webhook delivery's job
    chain = AsyncJobFactory()
    delivery = AsyncJobFactory(job_type="webhookDelivery", step="webhookDelivery")
    # then the list shows the chain only, by default
    default = admin_client.get(JOBS).content.decode()
    assert str(chain.pk) in default and str(delivery.pk) not in default
    # and the deliveries (or everything) when asked
    background = admin_client.get(f"{JOBS}?kind=background").content.decode()
    assert str(delivery.pk) in background and str(chain.pk) not in background
    everything = admin_client.get(f"{JOBS}?kind=all").content.decode()
    assert str(delivery.pk) in everything and str(chain.pk) in everything
    assert AsyncJob.objects.count() == 2


def test_an_onboarding_item_shows_its_brand_once(admin_client, db):
    # given an onboarding with an item that has a brand and one refused at accept
    org = OrganizationFactory()
    brand = BrandFactory(organization=org, name="Zanzibar")
    onboarding = Onboarding.objects.create(organization=org, total=2, in_progress=1, failed=1)
    OnboardingItem.objects.create(onboarding=onboarding, index=0, name="Zanzibar", brand=brand)
    OnboardingItem.objects.create(onboarding=onboarding, index=1, name="Quixotic")
    # when its page is read
    page = admin_client.get(f"/admin/provisioning/onboarding/{onboarding.pk}/change/")
    # then each item's brand is named once, linked to the brand when there is one
    text = page.content.decode()
    assert text.count("Zanzibar") == 1
    assert f'<a href="/admin/serenity/brand/{brand.pk}/change/">Zanzibar</a>' in text
    assert text.count("Quixotic") == 1


def test_an_org_s_cap_of_open_onboarding_items_is_editable(admin_client):
    org = organization_create(name="Acme", parent_workspace_id="p-1", serenity_enabled=True)
    url = f"/admin/serenity/organization/{org.id}/change/"
    response = admin_client.post(url, _org_form(org, onboarding_open_items_max="12000"))
    assert response.status_code == 302
    org.refresh_from_db()
    assert org.onboarding_open_items_max == 12000
    # and emptied, the default applies again
    admin_client.post(url, _org_form(org, onboarding_open_items_max=""))
    org.refresh_from_db()
    assert org.onboarding_open_items_max is None
