"""The Semrush client's lines name the step's row (`step_job_id`) as the runner's log context
has it: a worker's step names its row; an inline (sync) run's rows are never saved, so its
lines name none."""

from __future__ import annotations

import logging

import pytest
from django.db.models import Q

from jobs.models import AsyncJob
from provisioning import tasks
from tests.chains.helpers import brands_path, start_async_brand_with_market

pytestmark = pytest.mark.django_db(transaction=True)


def semrush_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    lines = [r for r in caplog.records if r.name == "serenity.semrush"]
    assert lines
    return lines


def test_a_sync_runs_client_lines_carry_its_rows(sw_writer, sim, caplog):
    # when a brand with a market is created synchronously (its chain's rows run at once)
    with caplog.at_level(logging.INFO, logger="serenity.semrush"):
        response = sw_writer.post(
            brands_path(sw_writer),
            {
                "name": "Inline",
                "baseUrl": "https://inline.example",
                "semrushMarket": {"market": "US", "languageCode": "en"},
            },
        )
    # then the client lines of its steps name their rows (SPEC §13.5: sync work has rows
    # too); the request's own check before them (the language catalogue) names none
    assert response.status_code == 201, response.json()
    rows = {str(pk) for pk in AsyncJob.objects.filter(mode="sync").values_list("pk", flat=True)}
    named = {
        str(line.step_job_id) for line in semrush_lines(caplog) if hasattr(line, "step_job_id")
    }
    assert named and named <= rows


def test_a_worker_steps_client_lines_carry_its_row(sw_writer, sim, published, caplog):
    # given an async brand create with a market, its workspace ready at once
    sim.configure({"settleSeconds": 0})
    job_id = start_async_brand_with_market(sw_writer)["jobId"]
    # when its delivery runs (the promotion, then the chained market step)
    with caplog.at_level(logging.INFO, logger="serenity.semrush"):
        tasks.provision_workspace(job_id)
    # then every client line names the row of the step that made it, in its fields and text
    rows = {
        str(pk)
        for pk in AsyncJob.objects.filter(Q(pk=job_id) | Q(root_id=job_id)).values_list(
            "pk", flat=True
        )
    }
    lines = semrush_lines(caplog)
    assert {line.step_job_id for line in lines} == rows  # type: ignore[attr-defined]
    for line in lines:
        assert f"step_job_id={line.step_job_id}" in line.getMessage()  # type: ignore[attr-defined]
