"""A chain's request id follows it into the worker (SPEC §10.4): stored with the chain, on every
worker line of it, with `job_id` = the id the client holds and `step_job_id` = the row."""

from __future__ import annotations

import json
import uuid

from django.db.models import Q

from jobs.models import AsyncJob
from jobs.services import REQUEST_ID_KEY
from tests.chains.helpers import brands_path, serenity_path
from tests.conftest import poll_job


def test_every_worker_line_of_a_chain_carries_its_request_id(sw_writer, sim, worker):
    # given the worker's log so far, and a request id of the client's own
    offset = worker.log_path.stat().st_size
    request_id = f"req-{uuid.uuid4().hex[:16]}"
    # when a brand with a market is created asynchronously (two steps and settle reads)
    response = sw_writer.post(
        brands_path(sw_writer),
        {
            "name": "Traced",
            "baseUrl": "https://traced.example",
            "async": True,
            "semrushMarket": {"market": "US", "languageCode": "en"},
        },
        HTTP_X_REQUEST_ID=request_id,
    )
    assert response.status_code == 202, response.json()
    accepted = response.json()
    job_id = accepted["jobId"]
    final = poll_job(sw_writer, f"{serenity_path(sw_writer, accepted['id'])}/jobs/{job_id}")
    assert final["status"] == "COMPLETED", final
    # then the chain's rows record the request
    rows = AsyncJob.objects.filter(Q(pk=job_id) | Q(root_id=job_id))
    row_ids = {str(row.pk) for row in rows}
    assert {row.metadata.get(REQUEST_ID_KEY) for row in rows} == {request_id}
    # and every worker line about the chain (by the client's id or by one of its rows) carries
    # it, with job_id = the client's id
    with worker.log_path.open("rb") as log:
        log.seek(offset)
        lines = [json.loads(line) for line in log.read().decode().splitlines() if line[:1] == "{"]
    of_chain = [
        line
        for line in lines
        if line.get("job_id") in row_ids
        or line.get("step_job_id") in row_ids
        or line.get("brand_id") == accepted["id"]
    ]
    assert len(of_chain) >= len(row_ids) * 2  # at least each step's upstream and "step ended"
    assert {line.get("request_id") for line in of_chain} == {request_id}
    assert {line.get("job_id") for line in of_chain} == {job_id}
    assert {line.get("step_job_id") for line in of_chain} == row_ids
    assert any(line["logger"] == "serenity.semrush" for line in of_chain)
