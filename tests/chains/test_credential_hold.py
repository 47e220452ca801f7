"""A refused credential holds work instead of failing it (SPEC §13.2), through a real worker and
the simulator over HTTP: Semrush answering 401 for a while to a credential it accepted before
fails no item of an onboarding, every item completes once it is accepted again (its refused
calls made again, no upstream object twice); a credential changed in the admin lifts the hold at
once; a credential never accepted fails as before."""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from jobs.models import AsyncJob, JobStatus
from provisioning import credentials, tasks
from provisioning.credential_hold import credentials_recheck
from provisioning.models import UpstreamCredential
from provisioning.sweep import attempts_sweep
from provisioning.upstream import client_for_org
from serenity.models import Market
from tests.chains.helpers import serenity_path, start_async_brand_with_market
from webhooks.models import WebhookDelivery
from webhooks.services import webhook_create

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = {
    "pathRegex": ".",
    "status": 401,
    "times": 100000,
    "body": {"detail": "Not authenticated"},
}


def wait_for(check: Any, *, timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def onboardings(caller: Any) -> str:
    return f"/v2/orgs/{caller.org.id}/serenity/onboardings"


def waiting_steps() -> list[AsyncJob]:
    """Steps released to wait for the credential (nobody runs them)."""
    return list(
        AsyncJob.objects.filter(
            status=JobStatus.IN_PROGRESS, waiting_for="credential", claim_token__isnull=True
        )
    )


def accepted(caller: Any) -> None:
    """The org's credential answers 2xx once: Semrush has accepted it."""
    client_for_org(caller.org).list_languages()
    credential = credentials.credential_of(caller.org)
    assert credentials.state_of(credential).accepted


def test_a_credential_refused_for_a_while_fails_no_item_and_every_item_completes_after(
    sw_writer, sim, worker, settings
):
    # given an endpoint for the event, and an onboarding of six brands with a market under way
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    webhook_create(organization=sw_writer.org, url="http://127.0.0.1:9/hook", events=None)
    sim.configure({"settleSeconds": 1.0})
    brands = [
        {
            "name": f"Held {n}",
            "baseUrl": f"https://held-{n}.example",
            "markets": [{"market": "US", "languageCode": "en"}],
        }
        for n in range(6)
    ]
    response = sw_writer.post(onboardings(sw_writer), {"brands": brands})
    assert response.status_code == 202, response.json()
    onboarding = response["Location"]
    wait_for(lambda: len(sim.state()["workspaces"]) >= 2, what="two workspaces upstream")
    # when Semrush refuses the credential it has accepted (a credential rotated upstream)
    sim.add_fault(REFUSED)
    # then the credential goes on hold, and every unfinished step ends up waiting for it
    reader = f"/v2/orgs/{sw_writer.org.id}/serenity"
    wait_for(
        lambda: sw_writer.get(reader).json()["credential"]["status"] == "refused",
        what="the hold",
    )
    body = wait_for(
        lambda: (
            (b := sw_writer.get(f"{onboarding}?limit=100").json())["counts"]["inProgress"]
            == len(waiting_steps())
            and b
        ),
        what="every unfinished item's step waiting for the credential",
    )
    assert body["status"] == "IN_PROGRESS"
    assert body["counts"]["failed"] == 0
    # and a waiting step reads so in its job's steps; the sweep leaves held work alone
    held = waiting_steps()[0]
    job = sw_writer.get(
        f"{serenity_path(sw_writer, str(held.brand_id))}/jobs/{held.root_id or held.id}"
    )
    assert job.status_code == 200
    assert job.json()["status"] == "IN_PROGRESS"
    assert [s["waitingFor"] for s in job.json()["steps"]][-1] == "credential"
    assert attempts_sweep()["reconciled"] == 0
    # and one credential.refused event was written for the hold
    events = Counter(WebhookDelivery.objects.values_list("event_type", flat=True))
    assert events["credential.refused"] == 1
    # when Semrush accepts the credential again and the re-check reads it (beat's job)
    sim.clear_faults()
    assert credentials_recheck()["lifted"] == 1
    # then every item completes, none failed
    done = wait_for(
        lambda: (
            (b := sw_writer.get(f"{onboarding}?limit=100").json())["status"] != "IN_PROGRESS" and b
        ),
        timeout=90,
        what="the onboarding's end",
    )
    assert done["status"] == "COMPLETED", done
    assert done["counts"] == {"inProgress": 0, "completed": 6, "failed": 0, "cancelled": 0}
    assert Market.objects.filter(status="live").count() == 6
    assert sw_writer.get(reader).json()["credential"]["status"] == "ok"
    # and nothing upstream was made twice
    state = sim.state()
    assert Counter(w["title"] for w in state["workspaces"]).most_common(1)[0][1] == 1
    assert len(state["workspaces"]) == 6
    assert len(state["projects"]) == 6
    assert (
        Counter(WebhookDelivery.objects.values_list("event_type", flat=True))["credential.refused"]
        == 1
    )


def test_a_credential_changed_in_the_admin_lifts_the_hold_at_once(sw_writer, sim, worker):
    # given a credential Semrush accepted, then refuses, and an async create waiting for it
    accepted(sw_writer)
    sim.add_fault(REFUSED)
    sim.configure({"settleSeconds": 0})
    started = start_async_brand_with_market(sw_writer)
    wait_for(waiting_steps, what="the step waiting for the credential")
    # when an operator enters a new credential in the admin (Semrush takes it)
    sim.clear_faults()
    sim.add_token("rotated-token")
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    admin = Client()
    admin.force_login(user)
    org = sw_writer.org
    page = admin.post(
        f"/admin/serenity/organization/{org.id}/change/",
        {
            "name": org.name,
            "semrush_parent_workspace_id": org.semrush_parent_workspace_id,
            "workspace_mode": org.workspace_mode,
            "serenity_enabled": "on",
            "semrush_credential": "rotated-token",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert page.status_code == 302
    # then the waiting step runs at once (not at the next re-check, a minute away) and the job
    # completes with the new credential
    job_path = f"{serenity_path(sw_writer, started['id'])}/jobs/{started['jobId']}"
    job = wait_for(
        lambda: (j := sw_writer.get(job_path).json())["status"] != "IN_PROGRESS" and j,
        timeout=30,
        what="the job's end",
    )
    assert job["status"] == "COMPLETED", job
    assert {s["waitingFor"] for s in job["steps"]} == {None}


def test_a_credential_never_accepted_fails_as_before(sw_writer, sim, worker):
    # given a credential Semrush has never accepted
    sim.add_fault(REFUSED)
    sim.configure({"settleSeconds": 0})
    # when an async create runs, and a sync one is asked
    started = start_async_brand_with_market(sw_writer)
    job_path = f"{serenity_path(sw_writer, started['id'])}/jobs/{started['jobId']}"
    job = wait_for(
        lambda: (j := sw_writer.get(job_path).json())["status"] != "IN_PROGRESS" and j,
        what="the job's end",
    )
    sync = sw_writer.post(
        f"/v2/orgs/{sw_writer.org.id}/brands", {"name": "Sync", "baseUrl": "https://s.example"}
    )
    # then both fail upstreamUnauthorized as before, and nothing is held
    assert job["status"] == "FAILED"
    assert job["error"]["code"] == "upstreamUnauthorized"
    assert sync.status_code == 401
    assert sync.json()["error"] == "upstreamUnauthorized"
    assert UpstreamCredential.objects.filter(refused_at__isnull=False).count() == 0
    assert waiting_steps() == []


def test_a_hold_older_than_its_max_fails_the_waiting_work_upstream_unauthorized(
    sw_writer, sim, published
):
    # given a credential Semrush accepted, then refuses, and an async create's first step run:
    # it waits for the credential, released, nothing failed
    accepted(sw_writer)
    sim.add_fault(REFUSED)
    sim.configure({"settleSeconds": 0})
    started = start_async_brand_with_market(sw_writer)
    root_id = started["jobId"]
    tasks.provision_workspace(root_id)
    root = AsyncJob.objects.get(pk=root_id)
    assert (root.status, root.waiting_for, root.claim_token) == (
        JobStatus.IN_PROGRESS,
        "credential",
        None,
    )
    # when the hold has lasted longer than SERENITY_CREDENTIAL_HOLD_MAX_SECONDS and the
    # re-check (still refused) wakes the work that waited
    UpstreamCredential.objects.update(refused_at=timezone.now() - timedelta(hours=7))
    assert credentials_recheck() == {"checked": 1, "lifted": 0, "woken": 1}
    assert published[-1] == root_id
    tasks.provision_workspace(root_id)
    # then the job fails upstreamUnauthorized, as for a credential never accepted
    job = sw_writer.get(f"{serenity_path(sw_writer, started['id'])}/jobs/{root_id}").json()
    assert job["status"] == "FAILED"
    assert job["error"]["code"] == "upstreamUnauthorized"
    assert {s["waitingFor"] for s in job["steps"]} == {None}


def test_a_held_step_back_after_the_recheck_interval_makes_the_refused_call_itself(
    sw_writer, sim, published, settings
):
    # given a hold and a step waiting for it, and Semrush accepting the credential again, but
    # no re-check has run (no beat)
    settings.SERENITY_CREDENTIAL_RECHECK_SECONDS = 60
    accepted(sw_writer)
    sim.add_fault(REFUSED)
    sim.configure({"settleSeconds": 0})
    started = start_async_brand_with_market(sw_writer)
    root_id = started["jobId"]
    tasks.provision_workspace(root_id)
    assert AsyncJob.objects.get(pk=root_id).waiting_for == "credential"
    sim.clear_faults()
    # when the step comes back within the interval, it still waits (no call)
    AsyncJob.objects.filter(pk=root_id).update(run_after=timezone.now())
    tasks.provision_workspace(root_id)
    assert AsyncJob.objects.get(pk=root_id).waiting_for == "credential"
    # when it comes back once the re-check is due, its call is the re-check: the hold lifts and
    # the chain completes
    UpstreamCredential.objects.update(checked_at=timezone.now() - timedelta(seconds=61))
    AsyncJob.objects.filter(pk=root_id).update(run_after=timezone.now())
    tasks.provision_workspace(root_id)
    assert UpstreamCredential.objects.get().refused_at is None
    job = sw_writer.get(f"{serenity_path(sw_writer, started['id'])}/jobs/{root_id}").json()
    assert job["status"] == "COMPLETED", job
