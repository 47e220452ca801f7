"""The admin's ledger list (SPEC §13.4) answers "which call made this project, in which job":
searched by a Semrush object id, read-only."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from provisioning.ledger.models import UpstreamCall

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(db: Any) -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def call(org_id: uuid.UUID, operation: str, project_id: str | None, **extra: Any) -> UpstreamCall:
    return UpstreamCall.objects.create(
        at=timezone.now() - timedelta(seconds=extra.pop("age", 0)),
        organization_id=org_id,
        operation=operation,
        method="POST",
        status_code=201,
        duration_ms=12,
        workspace_id="ws-1",
        project_id=project_id,
        request_id=str(uuid.uuid4()),
        **extra,
    )


def test_searching_a_project_id_finds_the_call_that_made_it_and_its_job(admin_client, org):
    # given a project's create in a chain, a later publish of it, and another project's create
    job = uuid.uuid4()
    made = call(org.id, "projects-post-project", "p-41", job_id=job, age=10)
    call(org.id, "projects-publish-project", "p-41", job_id=job)
    other = call(org.id, "projects-post-project", "p-42", job_id=uuid.uuid4())
    # when the list is searched by the project's id
    page = admin_client.get("/admin/provisioning/upstreamcall/?q=p-41")
    # then both of its calls are listed, the create among them with a link to its chain
    assert page.status_code == 200
    content = page.content.decode()
    assert "projects-post-project" in content and "projects-publish-project" in content
    assert f"/admin/jobs/asyncjob/{job}/change/" in content
    assert other.request_id not in content
    assert made.request_id in content
    # and a row opens read-only, with nothing to save or delete
    detail = admin_client.get(f"/admin/provisioning/upstreamcall/{made.pk}/change/")
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()
    deleted = admin_client.post(f"/admin/provisioning/upstreamcall/{made.pk}/delete/")
    assert deleted.status_code == 403
    assert UpstreamCall.objects.count() == 3
