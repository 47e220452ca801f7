"""The admin tells operators the truth (SPEC §10.4): chains as rows with their effective status,
an attempt's timeline and who started and cancelled it, admin actions in the admin log, a
read-only brand status and a "Deactivate" action that runs the real flow."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from jobs.services import ChainSpec, StepSpec, job_chains_create
from provisioning.models import AttemptStartedBy, AttemptStatus, ProvisioningAttempt
from serenity.models import ApiToken, Brand, BrandStatus, Market
from tests.factories import BrandFactory, ProvisioningAttemptFactory
from tests.support import calls

JOBS = "/admin/jobs/asyncjob/"
ATTEMPTS = "/admin/provisioning/provisioningattempt/"


@pytest.fixture
def admin_client(db) -> Client:  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _failed_chain(brand: Brand) -> AsyncJob:
    """A chain whose first step COMPLETED (workspace not ready) and whose second FAILED."""
    root = job_chains_create(
        [
            ChainSpec(
                organization_id=brand.organization_id,
                brand_id=brand.id,
                job_type=JobType.PROVISION_WORKSPACE,
                first=StepSpec(step=JobStep.PROVISION_WORKSPACE),
                then=StepSpec(step=JobStep.CREATE_MARKET),
            )
        ]
    )[0]
    second = AsyncJob.objects.get(root_id=root.id)
    now = timezone.now()
    AsyncJob.objects.filter(pk=root.id).update(
        status=JobStatus.COMPLETED,
        result={"workspaceStatus": "notReady"},
        current_id=second.id,
        finished_at=now,
    )
    AsyncJob.objects.filter(pk=second.id).update(
        status=JobStatus.FAILED,
        error={"code": "subworkspaceCreationFailed", "message": "failed", "retryable": True},
        run_after=now,
        finished_at=now,
    )
    return root


def test_the_jobs_list_has_one_row_per_chain_with_its_effective_status(admin_client):
    # given a chain that FAILED in its second step
    brand = BrandFactory(name="Failing Brand")
    root = _failed_chain(brand)
    # when
    listed = admin_client.get(JOBS)
    failed = admin_client.get(f"{JOBS}?chain_status=FAILED")
    completed = admin_client.get(f"{JOBS}?chain_status=COMPLETED")
    page = admin_client.get(f"{JOBS}{root.id}/change/").content.decode()
    # then: one row, the id clients hold, FAILED
    assert listed.status_code == 200
    assert [job.id for job in listed.context["cl"].result_list] == [root.id]
    changelist = listed.context["cl"]
    assert changelist.model_admin.chain_status(changelist.result_list[0]) == "FAILED"
    assert "Failing Brand" in listed.content.decode()
    assert [job.id for job in failed.context["cl"].result_list] == [root.id]
    assert list(completed.context["cl"].result_list) == []
    # and the chain's page shows its steps in order and the chain's error, not step 1's result
    assert page.index("provisionWorkspace") < page.index("createMarket")
    assert "subworkspaceCreationFailed" in page


def test_the_jobs_list_searches_by_brand_name(admin_client):
    # given
    wanted = _failed_chain(BrandFactory(name="Zebra Shoes"))
    _failed_chain(BrandFactory(name="Other"))
    # when
    found = admin_client.get(JOBS, {"q": "zebra"})
    # then
    assert [job.id for job in found.context["cl"].result_list] == [wanted.id]


def test_an_attempt_records_who_started_it_through_the_api(admin_client, sw_writer):
    # given
    token = ApiToken.objects.get(user=sw_writer.user)
    # when: a sync brand create with a market (the guard begins an attempt)
    response = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands",
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
        HTTP_X_REQUEST_ID="req-create-1",
    )
    # then
    assert response.status_code == 201, response.json()
    attempt = ProvisioningAttempt.objects.get(brand_id=response.json()["id"])
    actor = f"{sw_writer.user.username} (token {token.prefix})"
    assert (attempt.started_by_actor, attempt.started_request_id) == (actor, "req-create-1")
    assert attempt.candidate_at is not None and attempt.finished_at is not None
    assert attempt.created_at <= attempt.candidate_at <= attempt.finished_at
    page = admin_client.get(f"{ATTEMPTS}{attempt.id}/change/").content.decode()
    for text in ("Timeline", "began", "candidate", "promoted", "finished", actor, "req-create-1"):
        assert text in page


def test_the_cancel_action_records_who_cancelled_in_the_attempt_and_the_admin_log(admin_client):
    # given
    attempt = ProvisioningAttemptFactory()
    # when
    response = admin_client.post(
        ATTEMPTS,
        {"action": "cancel_attempts", "_selected_action": [str(attempt.pk)]},
        HTTP_X_REQUEST_ID="req-admin-cancel",
    )
    # then
    assert response.status_code == 302
    attempt.refresh_from_db()
    assert (attempt.status, attempt.reason) == (AttemptStatus.FAILED, "cancelled")
    assert (attempt.cancelled_by_actor, attempt.cancelled_request_id) == (
        "admin: root",
        "req-admin-cancel",
    )
    entry = LogEntry.objects.get(object_id=str(attempt.pk))
    assert (entry.action_flag, entry.user.get_username(), entry.change_message) == (
        CHANGE,
        "root",
        "Cancelled the attempt.",
    )
    page = admin_client.get(f"{ATTEMPTS}{attempt.id}/change/").content.decode()
    assert "admin: root" in page and "req-admin-cancel" in page


def test_a_brands_status_is_read_only_in_the_admin(admin_client):
    # given
    brand = BrandFactory(status=BrandStatus.ACTIVE)
    # when: a forged form sets it to deleted
    response = admin_client.post(
        f"/admin/serenity/brand/{brand.id}/change/",
        {
            "name": brand.name,
            "status": BrandStatus.DELETED,
            "base_url": brand.base_url,
            "urls": "[]",
            "aliases": "[]",
            "markets-TOTAL_FORMS": "0",
            "markets-INITIAL_FORMS": "0",
            "provisioning_attempts-TOTAL_FORMS": "0",
            "provisioning_attempts-INITIAL_FORMS": "0",
        },
    )
    # then
    assert response.status_code == 302, response.content.decode()[:2000]
    brand.refresh_from_db()
    assert brand.status == BrandStatus.ACTIVE


def test_the_deactivate_action_runs_the_deactivate_flow(admin_client, sw_writer, sim):
    # given a brand with a workspace and a market, created through the API
    created = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands",
        {
            "name": "Acme",
            "baseUrl": "https://acme.example",
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
    )
    assert created.status_code == 201, created.json()
    brand = Brand.objects.get(pk=created.json()["id"])
    assert brand.semrush_sub_workspace_id is not None
    market = Market.objects.get(brand=brand, deleted_at__isnull=True)
    setup = len(calls(sim))
    # when the operator picks the action
    asked = admin_client.post(
        "/admin/serenity/brand/",
        {"action": "deactivate_brands", "_selected_action": [str(brand.pk)]},
    )
    # then an intermediate page lists what it will remove, and nothing is removed yet
    assert asked.status_code == 200
    page = asked.content.decode()
    assert "Deactivate brands?" in page
    assert brand.semrush_sub_workspace_id in page
    assert market.semrush_project_id in page
    assert 'name="confirm" value="yes"' in page
    assert calls(sim)[setup:] == []
    brand.refresh_from_db()
    assert brand.status == BrandStatus.ACTIVE
    # when the operator confirms
    response = admin_client.post(
        "/admin/serenity/brand/",
        {"action": "deactivate_brands", "_selected_action": [str(brand.pk)], "confirm": "yes"},
    )
    # then: what the API's deactivate does
    assert response.status_code == 302
    brand.refresh_from_db()
    assert (brand.status, brand.semrush_sub_workspace_id) == (BrandStatus.PENDING, None)
    assert not Market.objects.filter(brand=brand, deleted_at__isnull=True).exists()
    attempt = ProvisioningAttempt.objects.get(brand=brand, started_by=AttemptStartedBy.DEACTIVATE)
    assert (attempt.status, attempt.started_by_actor) == (AttemptStatus.READY, "admin: root")
    assert LogEntry.objects.filter(object_id=str(brand.pk), action_flag=CHANGE).exists()


# --- SPEC §11.4: what operators found -----------------------------------------------------------


def test_a_failed_chain_is_failed_in_every_title_breadcrumb_and_column(admin_client):
    # given a chain that FAILED in its second step, and the attempt it drove
    brand = BrandFactory(name="Failing Brand")
    root = _failed_chain(brand)
    attempt = ProvisioningAttemptFactory(brand=brand, job_id=root.id)
    # when
    chain_page = admin_client.get(f"{JOBS}{root.id}/change/").content.decode()
    attempts = admin_client.get(ATTEMPTS).content.decode()
    attempt_page = admin_client.get(f"{ATTEMPTS}{attempt.id}/change/").content.decode()
    # then the chain's name carries FAILED, never the root row's own COMPLETED
    named = f"provisionWorkspace {root.id} [FAILED]"
    assert f"<title>{named} | View async job | Serenity admin</title>" in chain_page
    assert f"&rsaquo; {named}" in chain_page.replace("\n", "")
    assert named in attempts
    assert named in attempt_page
    for page in (chain_page, attempts, attempt_page):
        assert f"{root.id} [COMPLETED]" not in page


def test_the_jobs_list_can_be_filtered_to_overdue_work(admin_client):
    # given chains whose current step is: due 60 s ago and unclaimed; due 5 s ago; due 60 s ago
    # but held by a live claim; due 60 s ago under an expired lease; finished
    now = timezone.now()

    def chain(due_seconds_ago: float, **current: object) -> AsyncJob:
        root = job_chains_create(
            [
                ChainSpec(
                    organization_id=BrandFactory().organization_id,
                    brand_id=None,
                    job_type=JobType.PROVISION_WORKSPACE,
                    first=StepSpec(step=JobStep.PROVISION_WORKSPACE),
                )
            ]
        )[0]
        AsyncJob.objects.filter(pk=root.id).update(
            run_after=now - timezone.timedelta(seconds=due_seconds_ago), **current
        )
        return root

    overdue = chain(60)
    chain(5)
    chain(60, claim_token=uuid.uuid4(), lease_expires_at=now + timezone.timedelta(seconds=60))
    expired = chain(60, claim_token=uuid.uuid4(), lease_expires_at=now - timezone.timedelta(1))
    chain(60, status=JobStatus.COMPLETED)
    # when
    listed = admin_client.get(JOBS, {"overdue": "yes"})
    # then
    assert listed.status_code == 200
    assert {job.id for job in listed.context["cl"].result_list} == {overdue.id, expired.id}
    assert "Runnable, due more than 30 s ago" in listed.content.decode()


def test_the_admin_is_named_after_the_service(admin_client):
    # when
    page = admin_client.get("/admin/").content.decode()
    # then
    assert "Django administration" not in page
    assert "Serenity administration" in page
    assert "<title>Operations | Serenity admin</title>" in page
