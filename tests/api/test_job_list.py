"""The job list (`GET B/serenity/jobs`), Retry-After and `runAfter` of pending steps
(SPEC §10.3)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from api.jobs import accepted_headers
from jobs.models import AsyncJob, JobStatus, JobStep
from tests.factories import AsyncJobFactory, BrandFactory


def iso(value) -> str:  # type: ignore[no-untyped-def]
    return value.isoformat().replace("+00:00", "Z")


def jobs_url(caller, brand) -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/brands/{brand.id}/serenity/jobs"


def market_created(brand) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """What a createMarket step stores: the sync path's 201 (api.responses)."""
    body = {
        "brandId": str(brand.id),
        "geoTargetId": 2840,
        "languageCode": "en",
        "workspaceId": "ws-1",
        "projectId": "prj-1",
        "published": True,
    }
    return {"status": 201, "body": body, "outcome": "succeeded"}


def chain(brand, *, current_status: str, root_status: str = "COMPLETED"):  # type: ignore[no-untyped-def]
    """A two-step chain: a finished provisionWorkspace root, then createMarket (current)."""
    root = AsyncJobFactory(brand=brand, status=root_status, started_at=timezone.now())
    step = AsyncJobFactory(
        brand=brand,
        root=root,
        step=JobStep.CREATE_MARKET,
        position=1,
        status=current_status,
        result=market_created(brand) if current_status == JobStatus.COMPLETED else None,
        finished_at=None if current_status == JobStatus.IN_PROGRESS else timezone.now(),
    )
    AsyncJob.objects.filter(pk=root.pk).update(next=step, current=step)
    return AsyncJob.objects.get(pk=root.pk), AsyncJob.objects.get(pk=step.pk)


def test_the_list_holds_root_jobs_with_the_chains_effective_state(writer):
    brand = BrandFactory(organization=writer.org)
    done_root, done_step = chain(brand, current_status=JobStatus.COMPLETED)
    running_root, running_step = chain(brand, current_status=JobStatus.IN_PROGRESS)
    AsyncJobFactory(brand=BrandFactory(organization=writer.org))  # another brand's
    # when
    response = writer.get(jobs_url(writer, brand))
    # then newest first, one item per chain (the root's id): the poll document without steps
    assert response.status_code == 200
    assert response.json() == {
        "items": [
            {
                "jobId": str(running_root.pk),
                "jobType": "provisionWorkspace",
                "brandId": str(brand.pk),
                "mode": "async",
                "status": "IN_PROGRESS",
                "result": None,
                "error": None,
                "createdAt": iso(running_root.created_at),
                "updatedAt": iso(max(running_root.updated_at, running_step.updated_at)),
                "finishedAt": None,
            },
            {
                "jobId": str(done_root.pk),
                "jobType": "provisionWorkspace",
                "brandId": str(brand.pk),
                "mode": "async",
                "status": "COMPLETED",
                "result": market_created(brand),
                "error": None,
                "createdAt": iso(done_root.created_at),
                "updatedAt": iso(max(done_root.updated_at, done_step.updated_at)),
                "finishedAt": iso(done_step.finished_at),
            },
        ],
        "nextCursor": None,
    }


def test_the_status_filter_reads_the_effective_status(writer):
    brand = BrandFactory(organization=writer.org)
    done_root, _ = chain(brand, current_status=JobStatus.COMPLETED)
    # the root of the running chain is itself COMPLETED: only its current step counts
    running_root, _ = chain(brand, current_status=JobStatus.IN_PROGRESS)
    single = AsyncJobFactory(brand=brand, status=JobStatus.FAILED)
    for status, expected in [
        ("IN_PROGRESS", [running_root]),
        ("COMPLETED", [done_root]),
        ("FAILED", [single]),
        ("CANCELLED", []),
    ]:
        response = writer.get(jobs_url(writer, brand), data={"status": status})
        assert response.status_code == 200
        assert [j["jobId"] for j in response.json()["items"]] == [str(j.pk) for j in expected]


def test_an_unknown_status_is_400(writer):
    brand = BrandFactory(organization=writer.org)
    response = writer.get(jobs_url(writer, brand), data={"status": "DONE"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalidRequest",
        "message": 'status: "DONE" is not a valid choice.',
        "details": {"field": "status"},
    }


def test_another_orgs_brand_is_404(writer, org):
    from tests.factories import OrganizationFactory

    foreign = BrandFactory(organization=OrganizationFactory())
    response = writer.get(f"/v2/orgs/{writer.org.id}/brands/{foreign.id}/serenity/jobs")
    assert response.status_code == 404
    assert response.json() == {"error": "brandNotFound", "message": "Brand not found."}


def test_polling_sends_retry_after_until_the_next_step_and_its_run_after(writer):
    # given a chain whose current step is a settle read scheduled 30 s from now
    brand = BrandFactory(organization=writer.org)
    root = AsyncJobFactory(brand=brand, status=JobStatus.COMPLETED, started_at=timezone.now())
    due = timezone.now() + timedelta(seconds=30)
    read = AsyncJobFactory(brand=brand, root=root, position=1, run_after=due)
    AsyncJob.objects.filter(pk=root.pk).update(next=read, current=read)
    # when
    response = writer.get(f"{jobs_url(writer, brand)}/{root.pk}")
    # then
    assert response.status_code == 200
    assert response["Retry-After"] in ("30", "29")
    steps = response.json()["steps"]
    assert steps[1] == {
        "step": "provisionWorkspace",
        "status": "PENDING",
        "startedAt": None,
        "finishedAt": None,
        "runAfter": iso(due),
        "waitingFor": None,
    }
    assert "runAfter" not in steps[0]


def test_retry_after_is_at_most_60_and_at_least_1(writer):
    brand = BrandFactory(organization=writer.org)
    late = AsyncJobFactory(brand=brand, run_after=timezone.now() + timedelta(seconds=80))
    overdue = AsyncJobFactory(brand=brand, run_after=timezone.now() - timedelta(seconds=5))
    running = AsyncJobFactory(brand=brand, started_at=timezone.now())
    assert writer.get(f"{jobs_url(writer, brand)}/{late.pk}")["Retry-After"] == "60"
    assert writer.get(f"{jobs_url(writer, brand)}/{overdue.pk}")["Retry-After"] == "1"
    assert writer.get(f"{jobs_url(writer, brand)}/{running.pk}")["Retry-After"] == "1"
    # and a finished job sends none
    done = AsyncJobFactory(brand=brand, status=JobStatus.COMPLETED, result={})
    assert "Retry-After" not in writer.get(f"{jobs_url(writer, brand)}/{done.pk}")


def test_the_202_retry_after_is_the_first_steps_wait(writer):
    brand = BrandFactory(organization=writer.org)
    now_job = AsyncJobFactory(brand=brand)
    later_job = AsyncJobFactory(brand=brand, run_after=timezone.now() + timedelta(seconds=12.5))
    assert accepted_headers(now_job)["Retry-After"] == "1"
    assert accepted_headers(later_job)["Retry-After"] == "13"
