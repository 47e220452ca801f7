"""`POST B/serenity/prompts` (SPEC §4.5), sync and async, against the simulator over HTTP."""

from __future__ import annotations

import time
import uuid
from unittest.mock import ANY

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from jobs.endings import step_result_commit
from jobs.models import AsyncJob
from jobs.runner import StepRun
from jobs.services import job_claim
from provisioning import quota
from provisioning.flows import prompt_run as prompts_module
from provisioning.flows.prompts import classify_prompts_step
from provisioning.semrush import SemrushBusyError
from provisioning.tasks import classify_prompts
from provisioning.upstream import client_for_org
from serenity.models import Market, Prompt
from tests.conftest import poll_job, upstream_calls

PE = "/enterprise/projects/api"


# --- helpers ---------------------------------------------------------------------------------


def make_brand(caller, *markets: tuple[str, str]) -> str:
    """A brand (sync, via the API) with one market per (country, language); returns `B`."""
    brands = f"/v2/orgs/{caller.org.id}/brands"
    first, *rest = markets
    response = caller.post(
        brands,
        {
            "name": "Acme",
            "baseUrl": "https://www.acme.example/",
            "aliases": ["Acme Co"],
            "semrushMarket": {"market": first[0], "languageCode": first[1]},
        },
    )
    assert response.status_code == 201, response.json()
    b = f"{brands}/{response.json()['id']}"
    for country, language in rest:
        created = caller.post(
            f"{b}/serenity/markets", {"market": country, "languageCode": language}
        )
        assert created.status_code == 201, created.json()
    return b


def market(geo: int, language: str) -> Market:
    return Market.objects.get(geo_target_id=geo, language_code=language, deleted_at__isnull=True)


def prompts_path(m: Market) -> str:
    return f"{PE}/v3/workspaces/{m.workspace_id}/projects/{m.semrush_project_id}/aio/prompts/tagged"


def publish_path(m: Market) -> str:
    return f"{PE}/v1/workspaces/{m.workspace_id}/projects/{m.semrush_project_id}/publish"


def us(text: str, **extra):
    return {"text": text, "geoTargetId": 2840, "languageCode": "en", **extra}


def de(text: str, **extra):
    return {"text": text, "geoTargetId": 2276, "languageCode": "de", **extra}


class Calls:
    """The upstream requests made after this point."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.start = len(sim.requests_log())

    def __call__(self) -> list[tuple[str, str]]:
        return upstream_calls(self.sim)[self.start :]


def upstream_prompts(sim) -> list[tuple[str, str]]:
    """(projectId, text) of the prompts the simulator holds."""
    return [(p["projectId"], p["text"]) for p in sim.state()["prompts"]]


# --- sync --------------------------------------------------------------------------------------


def test_sync_pushes_once_per_market_publishes_each_project_once_and_stores_rows(sw_writer, sim):
    # given
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    us_market, de_market = market(2840, "en"), market(2276, "de")
    calls = Calls(sim)
    # when
    response = sw_writer.post(
        f"{b}/serenity/prompts",
        {
            "prompts": [
                us("  Best running shoes  ", tags=["shoes", "shoes", "top"]),
                de("Laufschuhe kaufen"),
                us("acme login", languageCode="EN"),
            ]
        },
    )
    # then
    assert response.status_code == 200, response.json()
    assert response.json() == {"created": 3, "skipped": 0, "failed": 0}
    assert calls() == [
        ("POST", prompts_path(us_market)),
        ("POST", prompts_path(de_market)),
        ("POST", publish_path(us_market)),
        ("POST", publish_path(de_market)),
    ]
    held = {p["text"]: p["id"] for p in sim.state()["prompts"]}
    rows = {
        p.text: (p.market_id, p.intent, p.tags, p.text_key, p.semrush_prompt_id)
        for p in Prompt.objects.all()
    }
    assert rows == {
        "Best running shoes": (
            us_market.pk,
            "commercial",
            ["shoes", "top"],
            "best running shoes",
            held["Best running shoes"],
        ),
        "Laufschuhe kaufen": (
            de_market.pk,
            "informational",
            [],
            "laufschuhe kaufen",
            held["Laufschuhe kaufen"],
        ),
        "acme login": (us_market.pk, "navigational", [], "acme login", held["acme login"]),
    }
    assert {market(2840, "en").status, market(2276, "de").status} == {"live"}


def test_prompts_semrush_holds_already_count_skipped_and_are_not_stored(sw_writer, sim):
    # given a market whose project already holds "Best shoes" upstream (added outside the
    # service: the service's own duplicate check cannot know it)
    b = make_brand(sw_writer, ("US", "en"))
    us_market = market(2840, "en")
    client = client_for_org(us_market.brand.organization)
    client.add_prompts(
        workspace_id=str(us_market.workspace_id),
        project_id=str(us_market.semrush_project_id),
        prompts=[{"name": "Best shoes", "tags": []}],
    )
    calls = Calls(sim)

    # when it and a new prompt are added
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("Best shoes"), us("New")]})

    # then Semrush's duplicate (`is_new: false`) counts as skipped and only the new one is
    # stored; the project is published once
    assert response.status_code == 200
    assert response.json() == {"created": 1, "skipped": 1, "failed": 0}
    assert calls() == [("POST", prompts_path(us_market)), ("POST", publish_path(us_market))]
    assert upstream_prompts(sim) == [
        (us_market.semrush_project_id, "Best shoes"),
        (us_market.semrush_project_id, "New"),
    ]
    assert list(Prompt.objects.values_list("text", flat=True)) == ["New"]


def test_a_push_semrush_holds_entirely_is_not_published(sw_writer, sim):
    # given a market whose project holds "Best shoes" upstream already
    b = make_brand(sw_writer, ("US", "en"))
    us_market = market(2840, "en")
    client_for_org(us_market.brand.organization).add_prompts(
        workspace_id=str(us_market.workspace_id),
        project_id=str(us_market.semrush_project_id),
        prompts=[{"name": "Best shoes"}],
    )
    calls = Calls(sim)

    # when only that prompt is added
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("Best shoes")]})

    # then it is skipped, nothing is stored, and nothing changed upstream to publish
    assert response.json() == {"created": 0, "skipped": 1, "failed": 0}
    assert calls() == [("POST", prompts_path(us_market))]
    assert Prompt.objects.count() == 0
    assert market(2840, "en").status == "live"


def test_sync_skips_duplicates_in_the_database_and_earlier_in_the_request(sw_writer, sim):
    # given
    b = make_brand(sw_writer, ("US", "en"))
    first = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("Best shoes")]})
    assert first.json() == {"created": 1, "skipped": 0, "failed": 0}
    us_market = market(2840, "en")
    calls = Calls(sim)
    # when
    response = sw_writer.post(
        f"{b}/serenity/prompts",
        {"prompts": [us("  best SHOES "), us("New one"), us("NEW ONE "), us("new one")]},
    )
    # then
    assert response.status_code == 200
    assert response.json() == {"created": 1, "skipped": 3, "failed": 0}
    assert calls() == [("POST", prompts_path(us_market)), ("POST", publish_path(us_market))]
    assert upstream_prompts(sim) == [
        (us_market.semrush_project_id, "Best shoes"),
        (us_market.semrush_project_id, "New one"),
    ]
    assert sorted(Prompt.objects.values_list("text", flat=True)) == ["Best shoes", "New one"]


def test_sync_with_only_duplicates_calls_nothing_upstream(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"))
    sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a"), us("b")]})
    calls = Calls(sim)
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("A"), us("b"), us("b")]})
    assert response.status_code == 200
    assert response.json() == {"created": 0, "skipped": 3, "failed": 0}
    assert calls() == []


def test_the_same_text_in_another_market_is_not_a_duplicate(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("shoes"), de("shoes")]})
    assert response.json() == {"created": 2, "skipped": 0, "failed": 0}


@pytest.mark.parametrize("run_async", [False, True])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"prompts": []}, "prompts: This list may not be empty."),
        ({}, "prompts: This field is required."),
        (
            {"prompts": [us(f"p{i}") for i in range(501)]},
            "prompts: at most 500 prompts per request.",
        ),
        (
            {"prompts": [us("fine"), de("no such market")]},
            "prompts[1]: no market with a project for geoTargetId 2276 / de",
        ),
        (
            {"prompts": [us("fine"), us("x"), us("wrong lang", languageCode="FR")]},
            "prompts[2]: no market with a project for geoTargetId 2840 / fr",
        ),
        ({"prompts": [us("   ")]}, "prompts[0].text: This field may not be blank."),
        ({"prompts": [us("a"), us(7)]}, "prompts[1].text: Not a valid string."),
        (
            {"prompts": [us("a", geoTargetId="x")]},
            "prompts[0].geoTargetId: A valid integer is required.",
        ),
        (
            {"prompts": [us("x", languageCode="english!")]},
            "prompts[0].languageCode must look like 'en' or 'pt-br'.",
        ),
    ],
)
def test_bad_bodies_answer_400_and_write_nothing(sw_writer, sim, body, message, run_async):
    # given
    b = make_brand(sw_writer, ("US", "en"))
    calls = Calls(sim)
    jobs_before = AsyncJob.objects.count()
    # when
    response = sw_writer.post(f"{b}/serenity/prompts", {**body, "async": run_async})
    # then
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == "invalidRequest"
    assert response.json()["message"] == message
    assert Prompt.objects.count() == 0
    assert AsyncJob.objects.count() == jobs_before
    assert calls() == []


@pytest.mark.parametrize("flag", ["true", 1, 0, None, {}, []])
def test_an_async_flag_that_is_not_a_json_boolean_is_400_with_nothing_written(sw_writer, sim, flag):
    b = make_brand(sw_writer, ("US", "en"))
    calls = Calls(sim)
    jobs_before = AsyncJob.objects.count()
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("shoes")], "async": flag})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalidRequest",
        "message": (
            "async: This field may not be null."
            if flag is None
            else "async: must be a JSON boolean (true or false)."
        ),
        "details": {"field": "async"},
    }
    assert Prompt.objects.count() == 0
    assert AsyncJob.objects.count() == jobs_before
    assert calls() == []


def test_a_deleted_market_cannot_be_named(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    assert sw_writer.delete(f"{b}/serenity/markets/2276/de").status_code == 204
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a"), de("b")]})
    assert response.status_code == 400
    assert response.json()["message"] == (
        "prompts[1]: no market with a project for geoTargetId 2276 / de"
    )


def test_a_failing_push_counts_its_prompts_failed_and_is_not_replayed(sw_writer, sim):
    # given: the first push (US) answers 500
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    us_market, de_market = market(2840, "en"), market(2276, "de")
    sim.add_fault({"method": "POST", "pathRegex": "/prompts/tagged$", "status": 500})
    calls = Calls(sim)
    # when
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a"), us("b"), de("c")]})
    # then
    assert response.status_code == 200
    assert response.json() == {"created": 1, "skipped": 0, "failed": 2}
    assert calls() == [
        ("POST", prompts_path(us_market)),
        ("POST", prompts_path(de_market)),
        ("POST", publish_path(de_market)),
    ]
    assert list(Prompt.objects.values_list("text", flat=True)) == ["c"]
    # and the failed prompts can be sent again: they were not stored
    again = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a"), us("b"), de("c")]})
    assert again.json() == {"created": 2, "skipped": 1, "failed": 0}


def test_a_push_that_times_out_counts_failed(sw_writer, sim, settings):
    b = make_brand(sw_writer, ("US", "en"))
    settings.SEMRUSH_TIMEOUT_SECONDS = 0.5
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/prompts/tagged$",
            "delayMs": 1500,
            "commit": True,
            "status": 201,
        }
    )
    calls = Calls(sim)
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a")]})
    assert response.json() == {"created": 0, "skipped": 0, "failed": 1}
    assert [c for c in calls() if c[1].endswith("/prompts/tagged")] == [
        ("POST", prompts_path(market(2840, "en")))
    ]
    assert Prompt.objects.count() == 0
    # The push was ambiguous: upstream did add it (which is why it is never replayed blind).
    deadline = time.monotonic() + 5
    while not sim.state()["prompts"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p["text"] for p in sim.state()["prompts"]] == ["a"]


def test_an_upstream_credential_refusal_is_a_failed_count_and_stops_further_pushes(sw_writer, sim):
    # Decision (provisioning/flows/prompts.py): prompts answer per market, so a refused
    # credential is `failed`, not a 401; after a 401 the remaining markets are not sent.
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    us_market = market(2840, "en")
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/prompts/tagged$",
            "status": 401,
            "body": {"detail": "Not authenticated"},
        }
    )
    calls = Calls(sim)
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a"), de("b")]})
    assert response.status_code == 200
    assert response.json() == {"created": 0, "skipped": 0, "failed": 2}
    assert calls() == [("POST", prompts_path(us_market))]
    assert Prompt.objects.count() == 0


def test_a_failed_publish_keeps_the_counts_and_the_next_request_publishes(sw_writer, sim):
    # given
    b = make_brand(sw_writer, ("US", "en"))
    us_market = market(2840, "en")
    sim.add_fault({"method": "POST", "pathRegex": "/publish$", "status": 500})
    # when
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a")]})
    # then: the prompt is in the project's draft and stored; the market shows it
    assert response.json() == {"created": 1, "skipped": 0, "failed": 0}
    assert market(2840, "en").status == "live_with_unpublished_updates"
    # when the same request is sent again
    calls = Calls(sim)
    again = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a")]})
    # then nothing is pushed, the project is published and the market is live again
    assert again.json() == {"created": 0, "skipped": 1, "failed": 0}
    assert calls() == [("POST", publish_path(us_market))]
    assert market(2840, "en").status == "live"


def test_upstream_errors_never_leak_into_the_answer(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"))
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": "/prompts/tagged$",
            "status": 500,
            "body": {"message": "internal server error at http://upstream/x"},
        }
    )
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a")]})
    assert response.content == b'{"created":0,"skipped":0,"failed":1}'


def test_a_reader_cannot_add_prompts(sw_writer, sim):
    from tests.conftest import make_caller

    b = make_brand(sw_writer, ("US", "en"))
    reader = make_caller(sw_writer.org, "reader")
    response = reader.post(f"{b}/serenity/prompts", {"prompts": [us("a")]})
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    assert Prompt.objects.count() == 0


# --- the job handler, called directly -----------------------------------------------------------


def _begin_job(sw_writer, b: str, prompts: list[dict]) -> AsyncJob:
    """A committed classifyPrompts job (no worker in these tests: on-commit publishing does
    not run inside a test transaction)."""
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": prompts, "async": True})
    assert response.status_code == 202, response.json()
    return AsyncJob.objects.get(pk=response.json()["jobId"])


def _run_once(job: AsyncJob) -> None:
    claimed = job_claim(job_id=job.pk)
    assert claimed is not None and claimed.claim_token is not None
    run = StepRun(job=claimed, claim_token=claimed.claim_token)
    step_result_commit(run, classify_prompts_step(run))


def test_job_metadata_holds_the_validated_prompts_and_no_secrets(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"))
    job = _begin_job(sw_writer, b, [us("  Shoes ", tags=["a"]), us("x", languageCode="EN")])
    assert job.metadata == {
        "prompts": [
            {"text": "Shoes", "geoTargetId": 2840, "languageCode": "en", "tags": ["a"]},
            {"text": "x", "geoTargetId": 2840, "languageCode": "en", "tags": []},
        ],
        # the request that started the chain (SPEC §10.4)
        "requestId": ANY,
    }
    assert (job.job_type, job.step, job.status) == (
        "classifyPrompts",
        "classifyPrompts",
        "IN_PROGRESS",
    )


def test_a_rate_limited_job_defers_and_the_rerun_resumes_with_the_same_counts(sw_writer, sim):
    # given: a job for two markets whose second push is refused with a long Retry-After
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    us_market, de_market = market(2840, "en"), market(2276, "de")
    job = _begin_job(sw_writer, b, [us("a"), de("b"), us("c"), us("a")])
    sim.add_fault(
        {
            "method": "POST",
            "pathRegex": f"/projects/{de_market.semrush_project_id}/aio/prompts/tagged$",
            "status": 429,
            "headers": {"Retry-After": "600"},
        }
    )
    calls = Calls(sim)
    # when: the first run
    _run_once(job)
    # then: US is pushed and checkpointed; the job waits for Retry-After, unclaimed
    job.refresh_from_db()
    assert job.status == "IN_PROGRESS"
    assert job.claim_token is None
    assert (job.run_after - timezone.now()).total_seconds() > 500
    assert job.metadata["progress"] == {
        "unitsDone": 1,
        "created": 2,
        "skipped": 0,
        "failed": 0,
        "touched": [str(us_market.pk)],
        "published": [],
    }
    # and the 429 paused the org's credential for everyone until then (SPEC §10.6)
    bucket = quota.credential_key(sim.org_token)
    with pytest.raises(SemrushBusyError):
        client_for_org(sw_writer.org).list_languages()
    # when: the re-run (time has passed: the pause is over too)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(bucket)
    AsyncJob.objects.filter(pk=job.pk).update(run_after=timezone.now())
    _run_once(job)
    # then: it resumes at DE, publishes each project once, and counts what a sync run counts
    job.refresh_from_db()
    assert job.status == "COMPLETED"
    assert job.result == {
        "status": 200,
        "body": {"created": 3, "skipped": 1, "failed": 0},
        "outcome": "succeeded",
    }
    assert calls() == [
        ("POST", prompts_path(us_market)),
        ("POST", prompts_path(de_market)),
        ("POST", prompts_path(de_market)),
        ("POST", publish_path(us_market)),
        ("POST", publish_path(de_market)),
    ]
    assert sorted(upstream_prompts(sim)) == sorted(
        [
            (us_market.semrush_project_id, "a"),
            (us_market.semrush_project_id, "c"),
            (de_market.semrush_project_id, "b"),
        ]
    )


def test_a_rerun_after_a_crash_skips_stored_prompts_and_never_pushes_them_twice(sw_writer, sim):
    # given: a run that stored its prompts and then died before finishing the job
    b = make_brand(sw_writer, ("US", "en"))
    job = _begin_job(sw_writer, b, [us("a"), us("b")])
    _run_once(job)
    AsyncJob.objects.filter(pk=job.pk).update(
        status="IN_PROGRESS",
        result=None,
        finished_at=None,
        claim_token=uuid.uuid4(),
        lease_expires_at=timezone.now(),
    )
    calls = Calls(sim)
    # when: the dispatcher re-delivers it after the lease expired
    _run_once(job)
    # then: nothing is pushed or published again and the counts are those of the first run
    job.refresh_from_db()
    assert job.status == "COMPLETED"
    assert job.result["body"] == {"created": 2, "skipped": 0, "failed": 0}
    assert calls() == []
    assert Prompt.objects.count() == 2
    # and without its checkpoint, a re-run still skips what is stored (counted as skipped)
    AsyncJob.objects.filter(pk=job.pk).update(
        status="IN_PROGRESS",
        result=None,
        finished_at=None,
        claim_token=None,
        metadata={"prompts": job.metadata["prompts"]},
    )
    _run_once(job)
    job.refresh_from_db()
    assert job.result["body"] == {"created": 0, "skipped": 2, "failed": 0}
    assert calls() == []


def test_a_run_that_lost_its_claim_keeps_the_rows_it_pushed_and_writes_nothing_to_the_job(
    sw_writer, sim
):
    # given: a run whose lease expired and whose job another delivery has claimed meanwhile
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    job = _begin_job(sw_writer, b, [us("a"), de("b")])
    stale = job_claim(job_id=job.pk)
    assert stale is not None and stale.claim_token is not None
    stale_token = stale.claim_token
    other_token = uuid.uuid4()
    AsyncJob.objects.filter(pk=job.pk).update(claim_token=other_token)
    calls = Calls(sim)
    # when
    run = StepRun(job=AsyncJob.objects.get(pk=job.pk), claim_token=stale_token)
    step_result_commit(run, classify_prompts_step(run))
    # then: it stopped after its first push, whose rows it kept; the job is untouched
    assert calls() == [("POST", prompts_path(market(2840, "en")))]
    assert list(Prompt.objects.values_list("text", flat=True)) == ["a"]
    job.refresh_from_db()
    assert (job.status, job.claim_token, job.result) == ("IN_PROGRESS", other_token, None)
    assert "progress" not in job.metadata


def test_a_long_run_hands_over_to_a_fresh_delivery_and_finishes_with_the_same_counts(
    sw_writer, sim, settings
):
    # given: a lease so short that every run stops after one unit
    settings.JOBS_LEASE_SECONDS = 0.0001
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    us_market, de_market = market(2840, "en"), market(2276, "de")
    job = _begin_job(sw_writer, b, [us("a"), de("b"), us("c")])
    calls = Calls(sim)
    runs = 0
    # when: deliveries come until the job is done
    while AsyncJob.objects.get(pk=job.pk).status == "IN_PROGRESS" and runs < 10:
        AsyncJob.objects.filter(pk=job.pk).update(lease_expires_at=None, claim_token=None)
        _run_once(job)
        runs += 1
    # then
    job.refresh_from_db()
    assert runs == 4  # US; DE; the US publish; the DE publish (handing over each time)
    assert job.result["body"] == {"created": 3, "skipped": 0, "failed": 0}
    assert calls() == [
        ("POST", prompts_path(us_market)),
        ("POST", prompts_path(de_market)),
        ("POST", publish_path(us_market)),
        ("POST", publish_path(de_market)),
    ]


def test_the_job_pushes_in_batches_of_100_and_publishes_once(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"))
    us_market = market(2840, "en")
    job = _begin_job(sw_writer, b, [us(f"prompt {i}") for i in range(250)])
    calls = Calls(sim)
    _run_once(job)
    job.refresh_from_db()
    assert job.result["body"] == {"created": 250, "skipped": 0, "failed": 0}
    assert calls() == [("POST", prompts_path(us_market))] * 3 + [("POST", publish_path(us_market))]
    assert Prompt.objects.count() == 250


def test_a_market_deleted_before_the_job_runs_counts_its_prompts_failed(sw_writer, sim):
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    job = _begin_job(sw_writer, b, [us("a"), de("b")])
    assert sw_writer.delete(f"{b}/serenity/markets/2276/de").status_code == 204
    _run_once(job)
    job.refresh_from_db()
    assert job.result["body"] == {"created": 1, "skipped": 0, "failed": 1}


def test_an_unexpected_error_fails_the_job_with_a_generic_error(sw_writer, sim, monkeypatch):
    b = make_brand(sw_writer, ("US", "en"))
    job = _begin_job(sw_writer, b, [us("a")])

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals at http://upstream")

    monkeypatch.setattr(prompts_module, "plan_units", boom)
    classify_prompts(str(job.pk))  # the task, called directly
    job.refresh_from_db()
    assert job.status == "FAILED"
    assert job.error == {
        "code": "jobFailed",
        "message": "The job failed unexpectedly.",
        "retryable": False,
    }
    assert job.result is None


# --- async with a real worker -------------------------------------------------------------------


def test_async_answers_202_and_the_worker_completes_with_the_sync_counts(sw_writer, sim, worker):
    # given
    b = make_brand(sw_writer, ("US", "en"), ("DE", "de"))
    us_market, de_market = market(2840, "en"), market(2276, "de")
    sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("already there")]})
    calls = Calls(sim)
    # when
    response = sw_writer.post(
        f"{b}/serenity/prompts",
        {
            "prompts": [us("Buy shoes"), de("Schuhe"), us("ALREADY there"), us("buy shoes ")],
            "async": True,
        },
    )
    # then: 202 at once, no upstream call inside the request
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body == {"jobId": body["jobId"], "jobType": "classifyPrompts", "status": "IN_PROGRESS"}
    assert response["Location"] == f"{b}/serenity/jobs/{body['jobId']}"
    assert int(response["Retry-After"]) >= 1
    # and polling (both routes) reaches COMPLETED with the counts a sync request gives
    final = poll_job(sw_writer, response["Location"])
    assert final["status"] == "COMPLETED", final
    assert final["jobId"] == body["jobId"]
    assert final["jobType"] == "classifyPrompts"
    assert final["result"] == {
        "status": 200,
        "body": {"created": 2, "skipped": 2, "failed": 0},
        "outcome": "succeeded",
    }
    assert final["error"] is None
    assert [(s["step"], s["status"]) for s in final["steps"]] == [("classifyPrompts", "COMPLETED")]
    assert final["steps"][0]["startedAt"] and final["steps"][0]["finishedAt"]
    older = sw_writer.get(f"{b}/serenity/prompts/jobs/{body['jobId']}")
    assert older.status_code == 200
    assert older.json() == sw_writer.get(response["Location"]).json()
    assert "Retry-After" not in older
    assert calls() == [
        ("POST", prompts_path(us_market)),
        ("POST", prompts_path(de_market)),
        ("POST", publish_path(us_market)),
        ("POST", publish_path(de_market)),
    ]
    intents = dict(Prompt.objects.values_list("text", "intent"))
    assert intents == {
        "already there": "informational",
        "Buy shoes": "transactional",
        "Schuhe": "informational",
    }
    # and the job cannot be cancelled
    cancel = sw_writer.post(f"{b}/serenity/jobs/{body['jobId']}/cancel")
    assert cancel.status_code == 409
    assert cancel.json()["error"] == "jobNotCancellable"


def test_an_async_job_in_progress_is_not_cancellable(sw_writer, sim, worker):
    # given: a push that takes a while
    b = make_brand(sw_writer, ("US", "en"))
    sim.add_fault({"method": "POST", "pathRegex": "/prompts/tagged$", "delayMs": 1000})
    response = sw_writer.post(f"{b}/serenity/prompts", {"prompts": [us("a")], "async": True})
    assert response.status_code == 202
    # when
    cancel = sw_writer.post(f"{b}/serenity/jobs/{response.json()['jobId']}/cancel")
    # then
    assert cancel.status_code == 409
    assert cancel.json()["error"] == "jobNotCancellable"
    final = poll_job(sw_writer, response["Location"])
    assert final["status"] == "COMPLETED"
    assert final["result"]["body"] == {"created": 1, "skipped": 0, "failed": 0}
