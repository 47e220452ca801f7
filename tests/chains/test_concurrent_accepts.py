"""100 concurrent async market creates over 20 brands, against the running server
(issue 4, acceptance 4)."""

from __future__ import annotations

import random
import threading
import time
from unittest import mock

import pytest
import requests

from jobs.dispatch import jobs_dispatch_due
from jobs.models import AsyncJob
from serenity.models import Brand
from tests.chains.helpers import brands_path

pytestmark = pytest.mark.django_db(transaction=True)

MARKETS = ["US", "GB", "DE", "FR", "ES"]
LANG = {"US": "en", "GB": "en", "DE": "de", "FR": "fr", "ES": "es"}


def test_100_concurrent_async_market_creates_over_20_brands(sw_writer, sim, worker, live_server):
    # given 20 ready brands
    brand_ids = []
    for n in range(20):
        response = sw_writer.post(
            brands_path(sw_writer), {"name": f"Brand {n}", "baseUrl": f"https://b{n}.example"}
        )
        assert response.status_code == 201, response.json()
        brand_ids.append(response.json()["id"])
    work = [(b, m) for b in brand_ids for m in MARKETS]
    random.Random(7).shuffle(work)
    queues = [work[i::20] for i in range(20)]
    barrier = threading.Barrier(20)
    answers: list[tuple[str, str, int, dict]] = []
    lock = threading.Lock()

    def client(items):
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {sw_writer.token}"
        barrier.wait()
        for brand_id, market in items:
            url = f"{live_server.url}/v2/orgs/{sw_writer.org.id}/brands/{brand_id}/serenity/markets"
            r = session.post(
                url,
                json={"market": market, "languageCode": LANG[market], "async": True},
                timeout=30,
            )
            with lock:
                answers.append((brand_id, market, r.status_code, r.json()))

    threads = [threading.Thread(target=client, args=(q,)) for q in queues]
    # when the burst arrives, its jobs are held back (publishing fails) until it is over, so that
    # every request meets a live attempt: otherwise a fast chain could finish first and a later
    # request for its brand would rightly get a second 202
    with mock.patch("jobs.publishing.celery_app.send_task", side_effect=ConnectionError("held")):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # the dispatcher then delivers the accepted jobs
    assert jobs_dispatch_due() == 20
    # then: exactly one 202 per brand, the rest 409, no 500
    assert len(answers) == 100
    assert {status for *_, status, _ in answers} <= {202, 409}
    accepted = [(b, m) for b, m, status, _ in answers if status == 202]
    assert sorted(b for b, _ in accepted) == sorted(brand_ids)
    for _, _, status, body in answers:
        if status == 409:
            assert body["error"] == "semrush_provisioning_in_progress"
    # and afterwards exactly one project per accepted slice upstream
    deadline = time.monotonic() + 60
    while AsyncJob.objects.filter(status="IN_PROGRESS").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not AsyncJob.objects.filter(status="IN_PROGRESS").exists()
    pointers = dict(Brand.objects.values_list("id", "semrush_sub_workspace_id"))
    projects = sim.state()["projects"]
    got = sorted((p["workspaceId"], p["locationId"]) for p in projects)
    from serenity.slices import geo_target_id_for

    want = sorted(
        (pointers[__import__("uuid").UUID(b)], geo_target_id_for(m)[1]) for b, m in accepted
    )
    assert got == want
