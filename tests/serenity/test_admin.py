"""The admin never shows a secret, and its operator actions call the services."""

from __future__ import annotations

import logging
import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from jobs.models import AsyncJob, JobStep, JobType
from jobs.services import ChainSpec, StepSpec, job_chains_create
from provisioning.models import ProvisioningAttempt
from serenity.models import ApiToken, Brand, Organization
from serenity.services import organization_create
from serenity.tokens import token_digest
from tests.factories import BrandFactory, ProvisioningAttemptFactory, UserFactory

CREDENTIAL = "admin-entered-credential-77"


@pytest.fixture
def admin_client(db) -> Client:  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _org_form(org: Organization, **fields: str) -> dict[str, str]:
    return {
        "name": org.name,
        "semrush_parent_workspace_id": org.semrush_parent_workspace_id or "",
        "workspace_mode": org.workspace_mode,
        "serenity_enabled": "on" if org.serenity_enabled else "",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        **fields,
    }


def test_org_credential_is_write_only(admin_client):
    # given
    org = organization_create(name="Acme", parent_workspace_id="p-1", serenity_enabled=True)
    url = f"/admin/serenity/organization/{org.id}/change/"
    # when
    response = admin_client.post(url, _org_form(org, semrush_credential=CREDENTIAL))
    # then
    assert response.status_code == 302
    org.refresh_from_db()
    assert org.semrush_credential() == CREDENTIAL
    page = admin_client.get(url).content.decode()
    assert CREDENTIAL not in page
    assert org.semrush_credential_encrypted not in page
    assert "set" in page


def test_org_credential_left_empty_keeps_the_current_one(admin_client):
    # given
    org = organization_create(name="Acme", semrush_token=CREDENTIAL)
    # when
    response = admin_client.post(
        f"/admin/serenity/organization/{org.id}/change/", _org_form(org, name="Acme 2")
    )
    # then
    assert response.status_code == 302
    org.refresh_from_db()
    assert org.name == "Acme 2"
    assert org.semrush_credential() == CREDENTIAL


def test_org_credential_can_be_removed(admin_client):
    # given
    org = organization_create(name="Acme", semrush_token=CREDENTIAL)
    # when
    response = admin_client.post(
        f"/admin/serenity/organization/{org.id}/change/",
        _org_form(org, clear_semrush_credential="on"),
    )
    # then
    assert response.status_code == 302
    org.refresh_from_db()
    assert org.semrush_credential() is None


def test_org_form_error_does_not_echo_the_credential(admin_client):
    # given
    org = organization_create(name="Acme")
    # when: invalid (blank name) with a credential typed in
    response = admin_client.post(
        f"/admin/serenity/organization/{org.id}/change/",
        _org_form(org, name="", semrush_credential=CREDENTIAL),
    )
    # then
    assert response.status_code == 200
    assert CREDENTIAL not in response.content.decode()
    org.refresh_from_db()
    assert org.semrush_credential() is None


def test_token_created_in_admin_is_shown_once_on_the_page_and_stored_hashed(admin_client, caplog):
    # given
    user = UserFactory(username="bob")
    caplog.set_level(logging.DEBUG)
    # when
    response = admin_client.post(
        "/admin/serenity/apitoken/add/", {"user": str(user.pk), "name": "laptop"}
    )
    # then the answer to the form is the page that shows it (no redirect)
    assert response.status_code == 200
    token = ApiToken.objects.get(user=user)
    page = response.content.decode()
    raw = max(re.findall(r"srn_[A-Za-z0-9_-]+", page), key=len)
    assert len(raw) > 40
    assert page.count(raw) == 1
    assert token.token_hash == token_digest(raw)
    assert token.name == "laptop"
    assert token.prefix == raw[:8]
    assert "no-store" in response.headers["Cache-Control"]
    # and it is in no cookie (no message was queued) and no log line
    assert all(raw not in morsel.value for morsel in response.cookies.values())
    assert "messages" not in response.cookies
    assert list(get_messages(response.wsgi_request)) == []
    assert raw not in caplog.text
    # and no later page shows it
    for path in (f"/admin/serenity/apitoken/{token.pk}/change/", "/admin/serenity/apitoken/"):
        later = admin_client.get(path)
        assert later.status_code == 200
        assert raw not in later.content.decode()
        assert all(raw not in morsel.value for morsel in later.cookies.values())


def test_revoke_action_revokes_tokens(admin_client):
    # given
    user = UserFactory()
    token = ApiToken.objects.create(user=user, prefix="srn_abcd", token_hash="0" * 64)
    # when
    response = admin_client.post(
        "/admin/serenity/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [str(token.pk)]},
    )
    # then
    assert response.status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None


def test_brand_page_shows_markets_and_attempts_and_saves_only_changed_fields(admin_client):
    # given
    brand = BrandFactory(name="Acme")
    attempt = ProvisioningAttemptFactory(brand=brand)
    url = f"/admin/serenity/brand/{brand.id}/change/"
    # when
    page = admin_client.get(url)
    # a worker sets the pointer after the operator opened the page
    Brand.objects.filter(pk=brand.pk).update(semrush_sub_workspace_id="ws-9")
    response = admin_client.post(
        url,
        {
            "name": "Acme",
            "status": "active",
            "base_url": "https://acme.example",
            "urls": "[]",
            "aliases": '["ACME Inc"]',
            "serenity_enabled": "unknown",
            "markets-TOTAL_FORMS": "0",
            "markets-INITIAL_FORMS": "0",
            "provisioning_attempts-TOTAL_FORMS": "1",
            "provisioning_attempts-INITIAL_FORMS": "1",
            "provisioning_attempts-0-id": str(attempt.id),
            "provisioning_attempts-0-brand": str(brand.id),
        },
    )
    # then
    assert page.status_code == 200
    assert str(attempt.id) in page.content.decode()
    assert response.status_code == 302, response.content.decode()[:2000]
    brand.refresh_from_db()
    assert brand.aliases == ["ACME Inc"]
    assert brand.base_url == "https://acme.example"
    assert brand.semrush_sub_workspace_id == "ws-9"


def test_attempt_age_filter_and_cancel_action(admin_client, monkeypatch):
    # given a stale pending attempt, a fresh one and a finished one
    stale = ProvisioningAttemptFactory()
    fresh = ProvisioningAttemptFactory()
    done = ProvisioningAttemptFactory(status="ready")
    ProvisioningAttempt.objects.filter(pk=stale.pk).update(
        updated_at=timezone.now() - timedelta(days=1)
    )
    cancelled: list[uuid.UUID] = []
    monkeypatch.setattr(
        "api.admin.provisioning.attempt_cancel",
        lambda *, attempt_id: cancelled.append(attempt_id) or True,
    )
    # when
    listed = admin_client.get("/admin/provisioning/provisioningattempt/?age=stale")
    response = admin_client.post(
        "/admin/provisioning/provisioningattempt/",
        {"action": "cancel_attempts", "_selected_action": [str(stale.pk), str(done.pk)]},
    )
    # then
    assert listed.status_code == 200
    assert listed.context["cl"].result_count == 1
    assert list(listed.context["cl"].result_list) == [stale]
    assert response.status_code == 302
    # only the pending attempt is handed to the service
    assert cancelled == [stale.id]
    assert fresh.id not in cancelled


def test_job_page_shows_the_chain_and_republish_calls_the_service(admin_client, monkeypatch):
    # given a chain root with a chained step
    brand = BrandFactory()
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
    calls: list[uuid.UUID] = []
    monkeypatch.setattr(
        "api.admin.jobs.job_republish", lambda *, job_id: calls.append(job_id) or True
    )
    # when
    page = admin_client.get(f"/admin/jobs/asyncjob/{root.id}/change/").content.decode()
    response = admin_client.post(
        "/admin/jobs/asyncjob/",
        {"action": "republish_jobs", "_selected_action": [str(root.id)]},
    )
    # then
    assert page.index("provisionWorkspace") < page.index("createMarket")
    assert AsyncJob.objects.filter(root_id=root.id).count() == 1
    assert response.status_code == 302
    assert calls == [root.id]


@pytest.mark.parametrize(
    "path",
    [
        "/admin/serenity/organization/",
        "/admin/serenity/organization/add/",
        "/admin/serenity/membership/",
        "/admin/serenity/apitoken/",
        "/admin/serenity/apitoken/add/",
        "/admin/serenity/brand/",
        "/admin/serenity/market/",
        "/admin/serenity/prompt/",
        "/admin/provisioning/provisioningattempt/",
        "/admin/provisioning/provisioningattempt/?age=fresh&status__exact=pending",
        "/admin/jobs/asyncjob/",
        "/admin/jobs/asyncjob/?chain_status=IN_PROGRESS&job_type__exact=provisionWorkspace",
    ],
)
def test_admin_pages_render(admin_client, path):
    # given
    BrandFactory()
    # when
    response = admin_client.get(path)
    # then
    assert response.status_code == 200
