"""The ledger of upstream writes (SPEC §13.4) of an async brand create with a market: every
write and confirm read is a row naming its job, step and objects; `GET S/upstream-calls` finds
a project's create by its id; another org never sees the rows; old rows are purged."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import AsyncJob
from provisioning import tasks
from provisioning.ledger.models import UpstreamCall
from provisioning.ledger.retention import upstream_calls_purge
from serenity.models import Brand, Market, Role
from tests.chains.helpers import start_async_brand_with_market
from tests.conftest import Caller, make_caller
from tests.factories import OrganizationFactory
from tests.support import assert_error

pytestmark = pytest.mark.django_db(transaction=True)


def calls_url(caller: Caller, query: str = "") -> str:
    return f"/v2/orgs/{caller.org.id}/serenity/upstream-calls{query}"


def created_chain(sw_writer: Caller, sim: Any) -> dict[str, Any]:
    """An async brand create with a US/en market, its steps run here to the end; the ids."""
    sim.configure({"settleSeconds": 0})
    accepted = start_async_brand_with_market(sw_writer)
    tasks.provision_workspace(accepted["jobId"])
    brand = Brand.objects.get(pk=accepted["id"])
    market = Market.objects.get(brand=brand)
    step = AsyncJob.objects.get(root_id=accepted["jobId"])
    return {
        "brand": str(brand.pk),
        "job": accepted["jobId"],
        "market_step": str(step.pk),
        "workspace": brand.semrush_sub_workspace_id,
        "project": market.semrush_project_id,
    }


def test_every_write_and_confirm_read_is_recorded_with_its_job_step_and_objects(
    sw_writer, sim, published
):
    # when an async create with a market runs its chain (workspace step, then market step)
    ids = created_chain(sw_writer, sim)
    # then each write and confirm read is one row, naming the chain, its step and its objects
    reader = make_caller(sw_writer.org, Role.READER)
    response = reader.get(calls_url(reader))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["nextCursor"] is None
    items = body["items"]
    job, market_step, brand = ids["job"], ids["market_step"], ids["brand"]
    workspace_only = {"workspaceId": ids["workspace"], "projectId": None}
    both = {"workspaceId": ids["workspace"], "projectId": ids["project"]}
    assert [
        (i["operation"], i["method"], i["statusCode"], i["brandId"], i["jobId"], i["stepJobId"])
        for i in reversed(items)
    ] == [
        ("workspace-child-create-v2", "POST", 200, brand, job, job),
        ("workspaces-status-get", "GET", 200, brand, job, job),
        ("projects-post-project", "POST", 201, brand, job, market_step),
        ("projects-patch-project", "PATCH", 200, brand, job, market_step),
        ("projects-publish-project", "POST", 202, brand, job, market_step),
        ("projects-get-project", "GET", 200, brand, job, market_step),
    ]
    assert [i["objectIds"] for i in reversed(items)] == [workspace_only] * 2 + [both] * 4
    # newest first, each with its own correlation id (a UUID) and a duration
    assert [i["at"] for i in items] == sorted((i["at"] for i in items), reverse=True)
    request_ids = [i["requestId"] for i in items]
    assert len(set(request_ids)) == len(items)
    assert all(str(uuid.UUID(r)) == r for r in request_ids)
    assert all(isinstance(i["durationMs"], int) and i["durationMs"] >= 0 for i in items)
    row = UpstreamCall.objects.get(pk=items[0]["id"])
    assert str(row.organization_id) == str(sw_writer.org.id)


def test_the_object_id_finds_which_call_made_a_project_in_which_job(sw_writer, sim, published):
    # given a finished async create, and another brand's calls
    ids = created_chain(sw_writer, sim)
    other = UpstreamCall.objects.create(
        at=timezone.now(),
        organization_id=sw_writer.org.id,
        brand_id=uuid.uuid4(),
        operation="projects-post-project",
        method="POST",
        status_code=201,
        duration_ms=3,
        workspace_id="ws-other",
        project_id="project-other",
        request_id=str(uuid.uuid4()),
    )
    # when the project is looked up by its id
    response = sw_writer.get(calls_url(sw_writer, f"?objectId={ids['project']}"))
    # then the calls naming it answer, its create the oldest, in the chain that made it
    assert response.status_code == 200, response.json()
    found = response.json()["items"]
    assert [i["operation"] for i in found] == [
        "projects-get-project",
        "projects-publish-project",
        "projects-patch-project",
        "projects-post-project",
    ]
    create = found[-1]
    assert (create["jobId"], create["stepJobId"]) == (ids["job"], ids["market_step"])
    # and the workspace's id finds its create too (every call naming it)
    by_workspace = sw_writer.get(calls_url(sw_writer, f"?objectId={ids['workspace']}")).json()
    assert by_workspace["items"][-1]["operation"] == "workspace-child-create-v2"
    assert len(by_workspace["items"]) == 6
    # and the other filters combine
    by_job = sw_writer.get(calls_url(sw_writer, f"?jobId={ids['job']}&limit=100")).json()
    assert len(by_job["items"]) == 6
    by_brand = sw_writer.get(calls_url(sw_writer, f"?brandId={other.brand_id}")).json()
    assert [i["id"] for i in by_brand["items"]] == [str(other.pk)]
    later = (timezone.now() + timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    assert sw_writer.get(calls_url(sw_writer, f"?since={later}")).json() == {
        "items": [],
        "nextCursor": None,
    }
    step_job = sw_writer.get(calls_url(sw_writer, f"?jobId={ids['market_step']}")).json()
    assert step_job["items"] == []  # a step's row is not a chain's id


def test_pages_follow_the_cursor_newest_first(sw_writer, sim, published):
    created_chain(sw_writer, sim)
    everything = [i["id"] for i in sw_writer.get(calls_url(sw_writer)).json()["items"]]
    first = sw_writer.get(calls_url(sw_writer, "?limit=4")).json()
    rest = sw_writer.get(calls_url(sw_writer, f"?limit=4&cursor={first['nextCursor']}")).json()
    assert [i["id"] for i in first["items"] + rest["items"]] == everything
    assert rest["nextCursor"] is None


def test_another_orgs_calls_are_never_visible(sw_writer, sim, published):
    # given one org's recorded chain
    ids = created_chain(sw_writer, sim)
    stranger = make_caller(OrganizationFactory(), Role.WRITER)
    # when another org lists its calls, by the first org's project and job too
    for query in ("", f"?objectId={ids['project']}", f"?jobId={ids['job']}"):
        response = stranger.get(calls_url(stranger, query))
        # then it sees none of them
        assert response.status_code == 200, response.json()
        assert response.json() == {"items": [], "nextCursor": None}
    # and it cannot read the first org's list at all
    assert_error(stranger.get(calls_url(sw_writer)), 403, "forbidden")
    assert UpstreamCall.objects.count() == 6


def test_bad_filters_are_refused_naming_them(writer):
    for query, field in (
        ("brandId=nope", "brandId"),
        ("jobId=42", "jobId"),
        ("since=yesterday", "since"),
        (f"objectId={'x' * 101}", "objectId"),
        ("limit=0", "limit"),
        ("operation=projects-post-project", "operation"),
    ):
        response = writer.get(calls_url(writer, f"?{query}"))
        assert assert_error(response, 400, "invalidRequest")["details"] == {"field": field}, query


def test_rows_older_than_the_retention_are_purged(org, settings):
    # given a row of 91 days ago, one of 89 days ago, with a 90-day retention
    settings.SERENITY_LEDGER_RETENTION_DAYS = 90.0

    def row(days: int) -> UpstreamCall:
        return UpstreamCall.objects.create(
            at=timezone.now() - timedelta(days=days),
            organization_id=org.id,
            operation="projects-delete-project",
            method="DELETE",
            status_code=204,
            duration_ms=5,
            request_id=str(uuid.uuid4()),
        )

    old, kept = row(91), row(89)
    # when beat's purge runs
    deleted = tasks.purge_upstream_calls()
    # then the old row is gone, the other kept
    assert deleted == 1
    assert list(UpstreamCall.objects.values_list("pk", flat=True)) == [kept.pk]
    assert not UpstreamCall.objects.filter(pk=old.pk).exists()
    assert upstream_calls_purge() == 0


def test_a_recorded_delete_names_the_workspace_and_project_of_its_path(org):
    # given a recorder of the org
    from provisioning.ledger.recorder import LedgerRecorder
    from provisioning.semrush.calls import SentAttempt

    recorder = LedgerRecorder(organization_id=str(org.id), brand_id=None)
    attempt = SentAttempt(
        method="DELETE",
        path="/enterprise/projects/api/v1/workspaces/ws-1/projects/p-1",
        request_id=str(uuid.uuid4()),
        started_at=timezone.now().timestamp(),
        duration_ms=4,
        status=204,
        response=None,
    )
    # when it records a project's delete
    recorder.record(attempt)
    # then the row names the contract's operation and the objects of the path
    row = UpstreamCall.objects.get(request_id=attempt.request_id)
    assert (row.operation, row.workspace_id, row.project_id, row.status_code) == (
        "projects-delete-project",
        "ws-1",
        "p-1",
        204,
    )
