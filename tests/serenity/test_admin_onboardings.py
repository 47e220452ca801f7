"""The onboardings admin (SPEC §11.2): counts and a progress bar, items linked to their brands
and chains, and a Cancel action recorded in the admin log."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.test import Client

from jobs.models import AsyncJob, JobStatus
from jobs.services import job_finish
from provisioning.models import Onboarding, OnboardingItem
from tests.factories import BrandFactory

ONBOARDINGS = "/admin/provisioning/onboarding/"


@pytest.fixture
def admin_client(db) -> Client:  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def onboarding(sw_writer, django_capture_on_commit_callbacks):  # type: ignore[no-untyped-def]
    BrandFactory(organization=sw_writer.org, name="Taken")
    with django_capture_on_commit_callbacks(execute=False):
        accepted = sw_writer.post(
            f"/v2/orgs/{sw_writer.org.id}/serenity/onboardings",
            {
                "brands": [
                    {"name": name, "baseUrl": "https://x.example"}
                    for name in ("Alpha", "Beta", "Gamma", "Taken")
                ]
            },
        ).json()
    done = OnboardingItem.objects.get(index=0)
    job_finish(
        job=AsyncJob.objects.get(pk=done.job_id), claim_token=None, status=JobStatus.COMPLETED
    )
    return Onboarding.objects.get(pk=accepted["onboardingId"])


def test_the_list_shows_each_onboarding_s_progress(admin_client, onboarding):
    page = admin_client.get(ONBOARDINGS).content.decode()
    assert str(onboarding.pk) in page
    assert 'class="onboarding-progress"' in page
    assert "2 / 4" in page  # one completed, one refused (brandExists)
    assert "IN_PROGRESS" in page


def test_the_page_lists_the_items_linked_to_their_brands_and_chains(admin_client, onboarding):
    page = admin_client.get(f"{ONBOARDINGS}{onboarding.pk}/change/").content.decode()
    assert "1 completed, 1 failed, 0 cancelled, 2 in progress" in page
    for item in OnboardingItem.objects.filter(job__isnull=False):
        assert f"/admin/serenity/brand/{item.brand_id}/change/" in page
        assert f"/admin/jobs/asyncjob/{item.job_id}/change/" in page
    assert "FAILED (brandExists)" in page


def test_the_cancel_action_cancels_open_items_and_is_logged(admin_client, onboarding):
    response = admin_client.post(
        ONBOARDINGS,
        {"action": "cancel_onboardings", "_selected_action": [str(onboarding.pk)]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Cancelled 1 onboarding(s)." in response.content.decode()
    statuses = sorted(
        (i.job.current or i.job).status
        for i in OnboardingItem.objects.filter(job__isnull=False).select_related("job__current")
    )
    assert statuses == ["CANCELLED", "CANCELLED", "COMPLETED"]
    onboarding.refresh_from_db()
    assert onboarding.cancelled_at is not None
    entry = LogEntry.objects.get(object_id=str(onboarding.pk))
    assert (entry.action_flag, entry.change_message) == (
        CHANGE,
        "Cancelled the onboarding's open items.",
    )
