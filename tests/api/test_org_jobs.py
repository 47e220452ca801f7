"""Jobs across an organization (SPEC §12.2): `GET /v2/orgs/{orgId}/serenity/jobs` with its
filters, `GET …/serenity/jobs/{jobId}` without knowing the brand, and `finishedAt`."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from jobs.models import AsyncJob, JobStatus, JobStep, JobType
from serenity.models import Role
from tests.conftest import make_caller
from tests.factories import AsyncJobFactory, BrandFactory, OrganizationFactory
from tests.support import assert_error
from webhooks.services import DELIVERY_JOB_TYPE, DELIVERY_STEP


def iso(value) -> str:  # type: ignore[no-untyped-def]
    return value.isoformat().replace("+00:00", "Z")


def jobs_url(caller, rest: str = "") -> str:  # type: ignore[no-untyped-def]
    return f"/v2/orgs/{caller.org.id}/serenity/jobs{rest}"


def aged(job: AsyncJob, minutes: int) -> AsyncJob:
    """`created_at` is `auto_now_add`: aged by an UPDATE."""
    AsyncJob.objects.filter(pk=job.pk).update(
        created_at=timezone.now() - timedelta(minutes=minutes)
    )
    return AsyncJob.objects.get(pk=job.pk)


def test_the_org_list_holds_every_brand_s_root_jobs_newest_first(writer):
    # given two brands' jobs, a chained step, a webhook delivery's job and another org's job
    first, second = (BrandFactory(organization=writer.org) for _ in range(2))
    done = aged(
        AsyncJobFactory(
            brand=first,
            status=JobStatus.FAILED,
            error={"code": "jobFailed", "message": "x", "retryable": False},
            finished_at=timezone.now(),
        ),
        minutes=3,
    )
    running = aged(AsyncJobFactory(brand=second), minutes=2)
    later_step = AsyncJobFactory(brand=second, root=running, step=JobStep.CREATE_MARKET, position=1)
    AsyncJobFactory(organization_id=writer.org.id, job_type=DELIVERY_JOB_TYPE, step=DELIVERY_STEP)
    AsyncJobFactory(brand=BrandFactory())
    reader = make_caller(writer.org, Role.READER)
    # when
    response = reader.get(jobs_url(reader))
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "items": [
            {
                "jobId": str(running.pk),
                "jobType": "provisionWorkspace",
                "mode": "async",
                "status": "IN_PROGRESS",
                "result": None,
                "error": None,
                "createdAt": iso(running.created_at),
                "updatedAt": iso(max(running.updated_at, later_step.updated_at)),
                "finishedAt": None,
                "brandId": str(second.pk),
            },
            {
                "jobId": str(done.pk),
                "jobType": "provisionWorkspace",
                "mode": "async",
                "status": "FAILED",
                "result": None,
                "error": {"code": "jobFailed", "message": "x", "retryable": False},
                "createdAt": iso(done.created_at),
                "updatedAt": iso(done.updated_at),
                "finishedAt": iso(done.finished_at),
                "brandId": str(first.pk),
            },
        ],
        "nextCursor": None,
    }


def test_the_org_list_filters_combine(writer):
    brand, other = (BrandFactory(organization=writer.org) for _ in range(2))
    old = aged(AsyncJobFactory(brand=brand, status=JobStatus.FAILED), minutes=60)
    recent_failed = AsyncJobFactory(brand=brand, status=JobStatus.FAILED)
    prompts = AsyncJobFactory(
        brand=brand, job_type=JobType.CLASSIFY_PROMPTS, step=JobStep.CLASSIFY_PROMPTS
    )
    elsewhere = AsyncJobFactory(brand=other, status=JobStatus.FAILED)

    def ids(query: str) -> list[str]:
        response = writer.get(jobs_url(writer, f"?{query}"))
        assert response.status_code == 200, response.json()
        return [item["jobId"] for item in response.json()["items"]]

    assert ids("status=FAILED") == [str(elsewhere.pk), str(recent_failed.pk), str(old.pk)]
    assert ids(f"status=FAILED&brandId={brand.pk}") == [str(recent_failed.pk), str(old.pk)]
    since = iso(timezone.now() - timedelta(minutes=30))
    assert ids(f"status=FAILED&brandId={brand.pk}&createdAfter={since}") == [str(recent_failed.pk)]
    assert ids("jobType=classifyPrompts") == [str(prompts.pk)]
    assert ids(f"brandId={uuid.uuid4()}") == []


def test_the_org_list_pages_like_every_list(writer):
    brand = BrandFactory(organization=writer.org)
    jobs = [aged(AsyncJobFactory(brand=brand), minutes=n) for n in (3, 2, 1)]
    page = writer.get(jobs_url(writer, "?limit=2")).json()
    assert [i["jobId"] for i in page["items"]] == [str(jobs[2].pk), str(jobs[1].pk)]
    rest = writer.get(jobs_url(writer, f"?limit=2&cursor={page['nextCursor']}")).json()
    assert [i["jobId"] for i in rest["items"]] == [str(jobs[0].pk)]
    assert rest["nextCursor"] is None


def test_bad_filters_are_refused_naming_them(writer):
    for query, field in (
        ("status=RUNNING", "status"),
        ("brandId=nope", "brandId"),
        ("jobType=webhookDelivery", "jobType"),
        ("createdAfter=yesterday", "createdAfter"),
        ("limit=0", "limit"),
        ("expand=steps", "expand"),
    ):
        response = writer.get(jobs_url(writer, f"?{query}"))
        assert assert_error(response, 400, "invalidRequest")["details"] == {"field": field}, query


def test_a_job_is_read_without_knowing_its_brand(writer):
    brand = BrandFactory(organization=writer.org)
    root = AsyncJobFactory(brand=brand, started_at=timezone.now())
    step = AsyncJobFactory(
        brand=brand,
        root=root,
        step=JobStep.CREATE_MARKET,
        position=1,
        status=JobStatus.CANCELLED,
        error={"code": "provisioningCancelled", "message": "x", "retryable": True},
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )
    AsyncJob.objects.filter(pk=root.pk).update(
        status=JobStatus.COMPLETED, finished_at=timezone.now(), next=step, current=step
    )
    # when
    by_org = writer.get(jobs_url(writer, f"/{root.pk}"))
    by_brand = writer.get(f"/v2/orgs/{writer.org.id}/brands/{brand.pk}/serenity/jobs/{root.pk}")
    # then the same document as the brand's route, ended when its last step ended
    assert by_org.status_code == 200, by_org.json()
    assert by_org.json() == by_brand.json()
    step.refresh_from_db()
    assert by_org.json()["status"] == "CANCELLED"
    assert by_org.json()["finishedAt"] == iso(step.finished_at)
    assert "Retry-After" not in by_org


def test_an_in_progress_job_has_no_finished_at_and_a_retry_after(writer):
    job = AsyncJobFactory(brand=BrandFactory(organization=writer.org))
    response = writer.get(jobs_url(writer, f"/{job.pk}"))
    assert response.json()["finishedAt"] is None
    assert response["Retry-After"] == "1"


def test_another_org_s_job_or_a_delivery_s_job_is_not_found(writer):
    foreign = AsyncJobFactory(brand=BrandFactory(organization=OrganizationFactory()))
    delivery = AsyncJobFactory(
        organization_id=writer.org.id, job_type=DELIVERY_JOB_TYPE, step=DELIVERY_STEP
    )
    for job_id in (foreign.pk, delivery.pk, uuid.uuid4()):
        assert_error(writer.get(jobs_url(writer, f"/{job_id}")), 404, "jobNotFound")


def test_the_checks_keep_spec_4_s_order(writer):
    from rest_framework.test import APIClient

    # 401 before a bad id, a bad id before an unknown org, an unknown org before membership
    anonymous = APIClient().get(f"/v2/orgs/{writer.org.id}/serenity/jobs/not-a-uuid")
    assert_error(anonymous, 401, "authenticationRequired")
    bad = writer.get(f"/v2/orgs/{uuid.uuid4()}/serenity/jobs/not-a-uuid")
    assert assert_error(bad, 400, "invalidRequest")["details"] == {"field": "jobId"}
    assert_error(writer.get(f"/v2/orgs/{uuid.uuid4()}/serenity/jobs?expand=1"), 404, "notFound")
    stranger = f"/v2/orgs/{OrganizationFactory().pk}/serenity/jobs?expand=1"
    assert_error(writer.get(stranger), 403, "forbidden")
