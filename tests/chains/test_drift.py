"""Drift (SPEC §13.1, issue 39): reconciliations find every drift kind with no upstream write,
show it on the brand, the market and the brand list, and repair it with the existing steps
within §13.7's calls, never making a duplicate. A real worker, the simulator over HTTP."""

from __future__ import annotations

import json
import time
from typing import Any
from unittest import mock

import pytest
import requests

from provisioning.exceptions import ProvisioningInProgressError
from provisioning.models import ProvisioningAttempt
from provisioning.reconcile.models import Drift, Reconciliation, ReconciliationItem
from provisioning.reconcile.repair import repair_begin
from provisioning.simulator import language_id
from provisioning.simulator.server import PE_PREFIX, UM_PREFIX
from serenity.models import Brand, Market, Prompt
from tests.chains.helpers import brands_path, serenity_path
from tests.conftest import Caller, poll_job
from webhooks.models import Webhook, WebhookDelivery


def provision(caller: Caller, names: list[str]) -> dict[str, dict[str, Any]]:
    """Async creates of brands with a US/en market, all live: name → {brand, market,
    workspace, project}."""
    locations = {}
    for name in names:
        response = caller.post(
            brands_path(caller),
            {
                "name": name,
                "baseUrl": f"https://{name.lower()}.example",
                "async": True,
                "semrushMarket": {"market": "US", "languageCode": "en"},
            },
        )
        assert response.status_code == 202, response.json()
        locations[name] = (response.json()["id"], response["Location"])
    made = {}
    for name, (brand_id, location) in locations.items():
        assert poll_job(caller, location)["status"] == "COMPLETED"
        market = Market.objects.get(brand_id=brand_id, deleted_at__isnull=True)
        assert market.status == "live"
        made[name] = {
            "brand": brand_id,
            "market": market,
            "workspace": market.workspace_id,
            "project": market.semrush_project_id,
        }
    return made


def upstream(sim: Any, method: str, path: str, **kwargs: Any) -> requests.Response:
    """A call to the simulator's own API, as someone in Semrush's UI would make it."""
    headers = {"Authorization": f"Bearer {sim.org_token}"}
    return requests.request(method, f"{sim.base_url}{path}", headers=headers, timeout=5, **kwargs)


def control(sim: Any, path: str, body: dict[str, Any]) -> None:
    response = requests.post(f"{sim.base_url}/__sim/{path}", json=body, timeout=5)
    assert response.status_code == 200, response.text


def reconcile(caller: Caller, **body: Any) -> dict[str, Any]:
    """POST a reconciliation, assert the 202, and poll it to its end; the final document."""
    path = f"/v2/orgs/{caller.org.id}/serenity/reconciliations"
    response = caller.post(path, body)
    assert response.status_code == 202, response.json()
    accepted = response.json()
    assert response["Location"] == f"{path}/{accepted['id']}"
    assert accepted["status"] == "IN_PROGRESS"
    deadline = time.monotonic() + 60
    while True:
        document = caller.get(response["Location"]).json()
        if document["status"] != "IN_PROGRESS" or time.monotonic() > deadline:
            return dict(document)
        time.sleep(0.1)


def items_by(document: dict[str, Any], brands: dict[str, dict[str, Any]]) -> set[tuple[str, str]]:
    names = {b["brand"]: name for name, b in brands.items()}
    return {(names[i["brandId"]], i["kind"]) for i in document["items"]}


def drift_everything(sim: Any, made: dict[str, dict[str, Any]]) -> str:
    """Semrush changes behind the service's back, one kind per brand; the id of the project
    made in Delta's workspace that no market records."""
    a, b, c, d, e, f = (made[n] for n in ("Alpha", "Bravo", "Charlie", "Delta", "Echo", "Fox"))
    projects = f"{PE_PREFIX}/v1/workspaces/{{}}/projects"
    assert upstream(sim, "DELETE", f"{projects.format(a['workspace'])}/{a['project']}").ok
    control(sim, f"projects/{b['project']}", {"publishStatus": "draft"})
    control(sim, f"projects/{c['project']}", {"primaryUrl": "https://elsewhere.example"})
    stray = upstream(
        sim,
        "POST",
        projects.format(d["workspace"]),
        json={
            "name": "stray",
            "type": "ai",
            "location_id": 2276,
            "language_id": language_id("German"),
            "country_code": "de",
        },
    )
    assert stray.status_code == 201, stray.text
    assert upstream(sim, "DELETE", f"{projects.format(e['workspace'])}/{e['project']}").ok
    assert upstream(sim, "DELETE", f"{UM_PREFIX}/v1/workspaces/{e['workspace']}").ok
    control(sim, f"workspaces/{f['workspace']}", {"status": "creation failed"})
    return str(stray.json()["id"])


NAMES = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Fox", "Golf"]


def test_a_plan_finds_every_kind_with_reads_only_and_shows_it(sw_writer, sim, worker):
    # given seven live brands, six of which Semrush changed behind the service's back
    made = provision(sw_writer, NAMES)
    stray = drift_everything(sim, made)
    before = len(sim.requests_log())

    # when a plan runs
    document = reconcile(sw_writer)

    # then every kind is found, with the action that would mend it and its calls
    assert document["status"] == "COMPLETED"
    assert document["repair"] is False
    assert document["counts"] == {"checked": 7, "drifted": 8, "repaired": 0, "failed": 0}
    assert items_by(document, made) == {
        ("Alpha", "projectGone"),
        ("Bravo", "projectNotLive"),
        ("Charlie", "trackedUrlChanged"),
        ("Delta", "unexpectedProject"),
        ("Echo", "workspaceGone"),
        ("Echo", "projectGone"),
        ("Fox", "workspaceFailed"),
        ("Fox", "projectGone"),
    }
    by_kind = {(i["brandId"], i["kind"]): i for i in document["items"]}
    assert by_kind[(made["Alpha"]["brand"], "projectGone")] == {
        "brandId": made["Alpha"]["brand"],
        "market": {"market": "US", "languageCode": "en"},
        "projectId": made["Alpha"]["project"],
        "kind": "projectGone",
        "action": "recreateProject",
        "plannedCalls": 4,
        "status": "planned",
        "error": None,
        "jobId": None,
    }
    assert by_kind[(made["Bravo"]["brand"], "projectNotLive")]["plannedCalls"] == 1
    assert by_kind[(made["Charlie"]["brand"], "trackedUrlChanged")]["plannedCalls"] == 2
    unexpected = by_kind[(made["Delta"]["brand"], "unexpectedProject")]
    assert (unexpected["market"], unexpected["projectId"], unexpected["action"]) == (
        None,
        stray,
        "reportOnly",
    )
    assert unexpected["status"] == "skipped"
    assert by_kind[(made["Echo"]["brand"], "workspaceGone")]["action"] == "reprovisionWorkspace"
    # and the plan only read: the family once, then one listing per brand (none for the
    # failed workspace)
    calls = [(r["method"], r["path"]) for r in sim.requests_log()[before:]]
    assert {method for method, _ in calls} == {"GET"}
    assert len(calls) == 1 + 6
    # and the drift shows on the brand, the market and the brand list
    echo = sw_writer.get(f"{brands_path(sw_writer)}/{made['Echo']['brand']}").json()
    assert echo["drift"]["kind"] == "workspaceGone"
    alpha = sw_writer.get(f"{brands_path(sw_writer)}/{made['Alpha']['brand']}").json()
    assert alpha["drift"] is None
    markets = sw_writer.get(f"{serenity_path(sw_writer, made['Alpha']['brand'])}/markets").json()
    assert [m["drift"]["kind"] for m in markets["items"]] == ["projectGone"]
    listed = sw_writer.get(f"{brands_path(sw_writer)}?drift=true").json()
    assert [b["name"] for b in listed["brands"]] == ["Alpha", "Bravo", "Charlie", "Echo", "Fox"]
    clean = sw_writer.get(f"{brands_path(sw_writer)}?drift=false").json()
    assert [b["name"] for b in clean["brands"]] == ["Delta", "Golf"]
    # and filters narrow the items
    only = sw_writer.get(
        f"/v2/orgs/{sw_writer.org.id}/serenity/reconciliations/{document['id']}?kind=projectGone"
    ).json()
    assert {i["kind"] for i in only["items"]} == {"projectGone"}
    assert len(only["items"]) == 3


def test_a_repair_mends_project_drift_within_its_calls_and_leaves_the_stray(sw_writer, sim, worker):
    # given brands whose project is gone (with two stored prompts), unpublished, retargeted,
    # and one with a stray project
    made = provision(sw_writer, ["Alpha", "Bravo", "Charlie", "Delta"])
    alpha = made["Alpha"]["market"]
    for text, tags in (("acme login", ["brand"]), ("best shoes", ["generic", "shoes"])):
        Prompt.objects.create(
            market=alpha,
            text=text,
            text_key=text,
            geo_target_id=alpha.geo_target_id,
            language_code=alpha.language_code,
            tags=tags,
        )
    a, b, c, d = (made[n] for n in ("Alpha", "Bravo", "Charlie", "Delta"))
    projects = f"{PE_PREFIX}/v1/workspaces/{{}}/projects"
    assert upstream(sim, "DELETE", f"{projects.format(a['workspace'])}/{a['project']}").ok
    control(sim, f"projects/{b['project']}", {"publishStatus": "draft"})
    control(sim, f"projects/{c['project']}", {"primaryUrl": "https://elsewhere.example"})
    stray = upstream(
        sim,
        "POST",
        projects.format(d["workspace"]),
        json={
            "name": "stray",
            "type": "ai",
            "location_id": 2276,
            "language_id": language_id("German"),
        },
    ).json()["id"]
    before = len(sim.requests_log())

    # when a reconciliation repairs
    document = reconcile(sw_writer, repair=True)

    # then each drift is repaired, the stray reported and left
    assert document["status"] == "COMPLETED", document
    assert document["counts"] == {"checked": 4, "drifted": 4, "repaired": 3, "failed": 0}
    assert sorted((i["kind"], i["status"]) for i in document["items"]) == [
        ("projectGone", "repaired"),
        ("projectNotLive", "repaired"),
        ("trackedUrlChanged", "repaired"),
        ("unexpectedProject", "skipped"),
    ]
    state = sim.state()
    per_workspace: dict[str, list[dict[str, Any]]] = {}
    for project in state["projects"]:
        per_workspace.setdefault(project["workspaceId"], []).append(project)
    # no duplicate: one project per market, the stray untouched
    assert [len(per_workspace[x["workspace"]]) for x in (a, b, c)] == [1, 1, 1]
    assert sorted(p["id"] for p in per_workspace[d["workspace"]]) == sorted([d["project"], stray])
    alpha.refresh_from_db()
    [remade] = per_workspace[a["workspace"]]
    assert alpha.semrush_project_id == remade["id"] != a["project"]
    assert alpha.status == "live_with_unpublished_updates"
    assert alpha.reserved_by is None
    assert remade["publishStatus"] == "live_with_unpublished_updates"
    assert [p["publishStatus"] for p in per_workspace[b["workspace"]]] == ["live"]
    assert per_workspace[c["workspace"]][0]["primaryUrl"] == "https://charlie.example"
    # the prompts are back with the record's tags, not stacked
    held = sorted(
        (p["text"], p["tags"]) for p in state["prompts"] if p["projectId"] == remade["id"]
    )
    assert held == [("acme login", ["brand"]), ("best shoes", ["generic", "shoes"])]
    # within §13.7's calls: the plan's reads (family + 4 listings), then 4 + 1 prompt batch
    # for the project gone, 1 for the unpublished, 2 for the retargeted, plus confirm reads
    # and at most one language catalogue read
    calls = sim.requests_log()[before:]
    writes_and_reads = [
        r for r in calls if not (r["method"] == "GET" and "/projects/" in r["path"])
    ]
    # (13 in the simulator: the catalogue was cached by the creates)
    assert len(writes_and_reads) <= 5 + (4 + 1) + 1 + 2 + 1
    # each repair is a job the org can poll, answering per market
    gone = next(i for i in document["items"] if i["kind"] == "projectGone")
    job = sw_writer.get(f"/v2/orgs/{sw_writer.org.id}/serenity/jobs/{gone['jobId']}").json()
    assert (job["jobType"], job["status"], [s["step"] for s in job["steps"]]) == (
        "repairBrand",
        "COMPLETED",
        ["repairMarkets"],
    )
    assert job["result"]["body"] == {
        "brandId": a["brand"],
        "markets": [
            {"marketId": str(alpha.pk), "kind": "projectGone", "repaired": True, "error": None}
        ],
    }
    # the drift is gone from the reads
    assert not Drift.objects.filter(brand_id__in=[a["brand"], b["brand"], c["brand"]]).exists()
    listed = sw_writer.get(f"{brands_path(sw_writer)}?drift=true").json()
    assert listed["brands"] == []
    # and a plan now finds only the stray
    again = reconcile(sw_writer)
    assert [i["kind"] for i in again["items"]] == ["unexpectedProject"]


def test_a_repair_provisions_a_lost_or_failed_workspace_again(sw_writer, sim, worker):
    # given a brand whose workspace was deleted and one whose workspace failed
    made = provision(sw_writer, ["Echo", "Fox"])
    e, f = made["Echo"], made["Fox"]
    projects = f"{PE_PREFIX}/v1/workspaces/{{}}/projects"
    assert upstream(sim, "DELETE", f"{projects.format(e['workspace'])}/{e['project']}").ok
    assert upstream(sim, "DELETE", f"{UM_PREFIX}/v1/workspaces/{e['workspace']}").ok
    control(sim, f"workspaces/{f['workspace']}", {"status": "invalid subscription"})

    # when a reconciliation repairs
    document = reconcile(sw_writer, repair=True)

    # then each brand is bound to a new workspace holding its market's one project
    assert document["status"] == "COMPLETED", document
    assert document["counts"] == {"checked": 2, "drifted": 4, "repaired": 4, "failed": 0}
    state = sim.state()
    for name, old in (("Echo", e), ("Fox", f)):
        brand = Brand.objects.get(pk=old["brand"])
        assert brand.semrush_sub_workspace_id not in (None, old["workspace"])
        market = Market.objects.get(brand=brand, deleted_at__isnull=True)
        assert market.status == "live"
        assert market.workspace_id == brand.semrush_sub_workspace_id
        titled = [w for w in state["workspaces"] if w["title"] == name]
        # never a duplicate: the one new workspace (the failed one cannot be used or emptied)
        assert sorted(w["status"] for w in titled) == (
            ["created"] if name == "Echo" else ["created", "invalid subscription"]
        )
        assert [p["id"] for p in state["projects"] if p["workspaceId"] == market.workspace_id] == [
            market.semrush_project_id
        ]
    assert not Drift.objects.filter(brand_id__in=[e["brand"], f["brand"]]).exists()
    echo = sw_writer.get(f"{brands_path(sw_writer)}/{e['brand']}").json()
    assert (echo["drift"], echo["semrushProvisioningStatus"]) == (None, "ready")


def test_a_second_reconciliation_is_refused_while_one_runs(sw_writer, serenity_org):
    # given a reconciliation in progress
    running = Reconciliation.objects.create(organization=serenity_org)
    path = f"/v2/orgs/{serenity_org.id}/serenity/reconciliations"

    # when another is asked for
    response = sw_writer.post(path, {"repair": True})

    # then 409 naming the running one, and nothing was written
    assert response.status_code == 409
    assert response.json() == {
        "error": "reconciliationInProgress",
        "message": "A reconciliation of this organization is in progress; wait for it to end.",
        "details": {"reconciliationId": str(running.pk)},
    }
    assert Reconciliation.objects.count() == 1


def test_a_repair_is_refused_with_the_guards_409_while_an_attempt_is_in_flight(
    sw_writer, sim, worker
):
    # given a brand whose project is gone, found by a plan
    made = provision(sw_writer, ["Alpha"])
    a = made["Alpha"]
    projects = f"{PE_PREFIX}/v1/workspaces/{a['workspace']}/projects"
    assert upstream(sim, "DELETE", f"{projects}/{a['project']}").ok
    document = reconcile(sw_writer)
    items = list(ReconciliationItem.objects.filter(reconciliation_id=document["id"]))
    brand = Brand.objects.select_related("organization").get(pk=a["brand"])
    # and an attempt in flight on it
    ProvisioningAttempt.objects.create(brand=brand, started_by="activate")
    before = len(sim.requests_log())

    # when its repair begins
    with pytest.raises(ProvisioningInProgressError) as refused:
        repair_begin(brand=brand, items=items, reconciliation_id=document["id"])

    # then the guard's 409, and nothing was written or called
    assert (refused.value.http_status, refused.value.code) == (
        409,
        "semrush_provisioning_in_progress",
    )
    assert not ReconciliationItem.objects.filter(job_id__isnull=False).exists()
    market = Market.objects.get(pk=a["market"].pk)
    assert (market.semrush_project_id, market.status, market.reserved_by) == (
        a["project"],
        "live",
        None,
    )
    assert len(sim.requests_log()) == before


def test_a_brand_being_repaired_answers_409_to_other_work(sw_writer, sim, worker):
    # given a brand whose project is gone, and its repair begun (its chain not yet run)
    made = provision(sw_writer, ["Alpha"])
    a = made["Alpha"]
    projects = f"{PE_PREFIX}/v1/workspaces/{a['workspace']}/projects"
    assert upstream(sim, "DELETE", f"{projects}/{a['project']}").ok
    document = reconcile(sw_writer)
    items = list(ReconciliationItem.objects.filter(reconciliation_id=document["id"]))
    brand = Brand.objects.select_related("organization").get(pk=a["brand"])
    with mock.patch("jobs.services.publish_job"):
        root_id = repair_begin(brand=brand, items=items, reconciliation_id=document["id"])

    # when a market is added to the brand meanwhile
    response = sw_writer.post(
        f"{serenity_path(sw_writer, a['brand'])}/markets",
        {"market": "DE", "languageCode": "de", "async": True},
    )

    # then 409, as for any provisioning in flight, naming the repair's job
    assert response.status_code == 409
    assert response.json()["error"] == "semrush_provisioning_in_progress"
    assert response.json()["details"] == {"jobId": str(root_id)}
    job = sw_writer.get(f"{serenity_path(sw_writer, a['brand'])}/jobs/{root_id}").json()
    assert (job["jobType"], [s["step"] for s in job["steps"]]) == ("repairBrand", ["repairMarkets"])


def test_drift_events_are_sent_per_brand_with_their_kinds(sw_writer, sim, worker):
    # given an endpoint subscribed to drift events, and a brand whose project is unpublished
    webhook = Webhook(
        organization=sw_writer.org,
        url="http://127.0.0.1:9/hook",
        events=["drift.detected", "drift.repaired"],
    )
    webhook.set_secret("whsec_dGVzdC1zZWNyZXQtb2YtdGhpcnR5LXR3by1ieXRlcyE=")
    webhook.save()
    made = provision(sw_writer, ["Bravo"])
    control(sim, f"projects/{made['Bravo']['project']}", {"publishStatus": "draft"})

    # when a plan, then a repair, run
    planned = reconcile(sw_writer)
    repaired = reconcile(sw_writer, repair=True)

    # then one drift.detected (the second look found nothing new) and one drift.repaired
    sent = [
        (d.event_type, json.loads(d.body)["data"])
        for d in WebhookDelivery.objects.filter(webhook=webhook).order_by("created_at")
    ]
    brand_id = made["Bravo"]["brand"]
    assert sent == [
        (
            "drift.detected",
            {"brandId": brand_id, "kinds": ["projectNotLive"], "reconciliationId": planned["id"]},
        ),
        (
            "drift.repaired",
            {"brandId": brand_id, "kinds": ["projectNotLive"], "reconciliationId": repaired["id"]},
        ),
    ]


def test_another_orgs_reconciliation_is_not_found(sw_writer, writer, serenity_org):
    # given a reconciliation of the Serenity org
    theirs = Reconciliation.objects.create(organization=serenity_org)

    # when a member of another org reads it through their own org
    response = writer.get(f"/v2/orgs/{writer.org.id}/serenity/reconciliations/{theirs.pk}")

    # then 404, as for an unknown id
    assert response.status_code == 404
    assert response.json() == {
        "error": "reconciliationNotFound",
        "message": "Reconciliation not found.",
    }


def test_a_repair_adopting_a_project_that_holds_prompts_does_not_stack_their_tags(
    sw_writer, sim, worker
):
    # given a market with two stored prompts whose project is gone, and in its workspace a
    # draft on its slice that someone made, already holding one of the prompts with a tag of
    # its own
    made = provision(sw_writer, ["Alpha"])
    a = made["Alpha"]
    market = a["market"]
    for text, tags in (("acme login", ["brand"]), ("best shoes", ["generic", "shoes"])):
        Prompt.objects.create(
            market=market,
            text=text,
            text_key=text,
            geo_target_id=market.geo_target_id,
            language_code=market.language_code,
            tags=tags,
        )
    projects = f"{PE_PREFIX}/v1/workspaces/{a['workspace']}/projects"
    assert upstream(sim, "DELETE", f"{projects}/{a['project']}").ok
    draft = upstream(
        sim,
        "POST",
        projects,
        json={
            "name": "US-en",
            "type": "ai",
            "location_id": 2840,
            "language_id": language_id("English"),
            "country_code": "us",
        },
    ).json()["id"]
    tagged = f"{PE_PREFIX}/v3/workspaces/{a['workspace']}/projects/{draft}/aio/prompts/tagged"
    held = upstream(sim, "POST", tagged, json={"prompts": [{"name": "acme login", "tags": ["ui"]}]})
    assert held.status_code == 201

    # when a reconciliation repairs
    document = reconcile(sw_writer, repair=True)

    # then the draft is adopted (no second project on the slice) and the prompts are back:
    # the one Semrush held keeps its own tag (not stacked with the record's), the other has
    # the record's
    assert document["status"] == "COMPLETED", document
    market.refresh_from_db()
    assert market.semrush_project_id == draft
    assert [p["id"] for p in sim.state()["projects"]] == [draft]
    prompts = sorted((p["text"], p["tags"]) for p in sim.state()["prompts"])
    assert prompts == [("acme login", ["ui"]), ("best shoes", ["generic", "shoes"])]


def test_a_reconciliation_that_cannot_read_the_family_fails_without_writing(sw_writer, sim, worker):
    # given a brand, and Semrush refusing the org's family listing
    provision(sw_writer, ["Alpha"])
    sim.add_fault({"method": "GET", "pathRegex": "/family$", "status": 401, "times": 5})
    before = len(sim.requests_log())

    # when a plan runs
    document = reconcile(sw_writer)

    # then it failed with a generic error, read nothing else and found nothing (the credential
    # answered 2xx before, so the 401 put it on hold: SPEC §13.2's `credentialRefused`)
    assert document["status"] == "FAILED"
    assert document["error"]["code"] == "credentialRefused"
    assert document["counts"] == {"checked": 0, "drifted": 0, "repaired": 0, "failed": 0}
    assert document["finishedAt"] is not None
    assert [r["path"].rsplit("/", 1)[-1] for r in sim.requests_log()[before:]] == ["family"]
    assert not Drift.objects.exists()
