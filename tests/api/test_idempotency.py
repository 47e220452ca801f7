"""Idempotency-Key on every POST and PATCH under /v2 (SPEC §10.3)."""

from __future__ import annotations

import threading
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import AsyncJob
from provisioning.models import ProvisioningAttempt
from serenity.idempotency import request_digest
from serenity.models import Brand, IdempotencyKey
from serenity.tasks import purge_idempotency_keys
from tests.chains.helpers import brands_path
from tests.conftest import make_caller
from tests.factories import OrganizationFactory


@pytest.fixture
def org(db):  # type: ignore[no-untyped-def]
    """A plain org: brand creates write a row and call nobody (the async tests use sw_writer)."""
    return OrganizationFactory(serenity_enabled=False, semrush_parent_workspace_id=None)


def keyed(key: str) -> dict[str, str]:
    return {"HTTP_IDEMPOTENCY_KEY": key}


def test_a_repeat_with_the_same_body_replays_the_first_answer(writer):
    # given a keyed brand create that answered 201
    body = {"name": "Alpha", "baseUrl": "https://a.example"}
    first = writer.post(brands_path(writer), body, **keyed("k-1"))
    assert first.status_code == 201, first.json()
    assert "Idempotent-Replayed" not in first
    # when the same request comes again (keys in another order: canonical JSON)
    again = writer.post(
        brands_path(writer), {"baseUrl": "https://a.example", "name": "Alpha"}, **keyed("k-1")
    )
    # then the first answer is replayed and nothing new is written
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Brand.objects.filter(organization=writer.org).count() == 1
    row = IdempotencyKey.objects.get()
    assert (row.method, row.path, row.key, row.response_status) == (
        "POST",
        brands_path(writer),
        "k-1",
        201,
    )


# A brandExists breaks the test's enclosing transaction (production has none): commit.
@pytest.mark.django_db(transaction=True)
def test_a_stored_4xx_is_replayed_too(writer):
    # given a brand "Alpha" and a keyed create of the same name that answered 409
    assert writer.post(brands_path(writer), {"name": "Alpha"}).status_code == 201
    first = writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("k-2"))
    assert first.status_code == 409
    # when the brand is gone and the keyed request is repeated
    Brand.objects.all().delete()
    again = writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("k-2"))
    # then it answers what it answered the first time, and creates nothing
    assert again.status_code == 409
    assert (
        again.json()
        == first.json()
        == {
            "error": "brandExists",
            "message": "A brand with this name already exists in the organization.",
        }
    )
    assert again["Idempotent-Replayed"] == "true"
    assert Brand.objects.count() == 0


def test_a_different_body_with_the_same_key_is_422(writer):
    assert writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("k-3")).status_code == 201
    # when
    response = writer.post(brands_path(writer), {"name": "Beta"}, **keyed("k-3"))
    # then
    assert response.status_code == 422
    assert response.json() == {
        "error": "idempotencyKeyReused",
        "message": "This Idempotency-Key was already used with a different request body.",
    }
    assert list(Brand.objects.values_list("name", flat=True)) == ["Alpha"]
    assert IdempotencyKey.objects.count() == 1


def test_a_repeat_while_the_first_is_in_flight_is_409(writer):
    # given a claimed key whose request has not answered yet
    body = {"name": "Alpha"}
    IdempotencyKey.objects.create(
        user=writer.user,
        organization=writer.org,
        method="POST",
        path=brands_path(writer),
        key="k-4",
        request_digest=request_digest(body),
        expires_at=timezone.now() + timedelta(days=1),
    )
    # when
    response = writer.post(brands_path(writer), body, **keyed("k-4"))
    # then
    assert response.status_code == 409
    assert response.json() == {
        "error": "idempotencyKeyInUse",
        "message": "A request with this Idempotency-Key is still being processed; "
        "retry after it finishes.",
    }
    assert "Idempotent-Replayed" not in response
    assert Brand.objects.count() == 0


def test_an_abandoned_claim_is_taken_over(writer, settings):
    # given a claim older than IDEMPOTENCY_IN_FLIGHT_SECONDS that never answered
    settings.IDEMPOTENCY_IN_FLIGHT_SECONDS = 60
    body = {"name": "Alpha"}
    stale = IdempotencyKey.objects.create(
        user=writer.user,
        organization=writer.org,
        method="POST",
        path=brands_path(writer),
        key="k-5",
        request_digest=request_digest(body),
        expires_at=timezone.now() + timedelta(days=1),
    )
    IdempotencyKey.objects.filter(pk=stale.pk).update(
        created_at=timezone.now() - timedelta(seconds=61)
    )
    # when
    response = writer.post(brands_path(writer), body, **keyed("k-5"))
    # then the request runs
    assert response.status_code == 201
    assert Brand.objects.count() == 1
    assert list(IdempotencyKey.objects.values_list("response_status", flat=True)) == [201]


def test_a_5xx_answer_is_not_stored_and_releases_the_key(writer):
    # given a create that fails unexpectedly
    with mock.patch("api.brands.brand_create", side_effect=RuntimeError("boom")):
        failed = writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("k-6"))
    assert failed.status_code == 500
    assert IdempotencyKey.objects.count() == 0
    # when the client retries with the same key
    retried = writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("k-6"))
    # then the request runs again
    assert retried.status_code == 201
    assert "Idempotent-Replayed" not in retried
    assert Brand.objects.count() == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "clé", "a\x7fb"])
def test_a_malformed_key_is_400_and_nothing_is_written(writer, key):
    response = writer.post(brands_path(writer), {"name": "Alpha"}, **keyed(key))
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalidRequest",
        "message": "Idempotency-Key must be 1 to 255 printable ASCII characters.",
        "details": {"field": "Idempotency-Key"},
    }
    assert Brand.objects.count() == 0
    assert IdempotencyKey.objects.count() == 0


def test_the_longest_key_is_accepted(writer):
    response = writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("~" * 255))
    assert response.status_code == 201
    assert IdempotencyKey.objects.get().key == "~" * 255


# A brandExists breaks the test's enclosing transaction (production has none): commit.
@pytest.mark.django_db(transaction=True)
def test_the_key_is_scoped_to_user_and_path(writer, org):
    # given a key used by one writer to create "Alpha"
    assert writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("k-7")).status_code == 201
    other = make_caller(org)
    # when another member uses the same key and body
    response = other.post(brands_path(other), {"name": "Alpha"}, **keyed("k-7"))
    # then it is their own request (here: the name is taken), not a replay
    assert response.status_code == 409
    assert response.json()["error"] == "brandExists"
    assert "Idempotent-Replayed" not in response
    # and the same key on another path (PATCH of the brand) is a different scope
    brand = Brand.objects.get()
    patched = writer.patch(f"{brands_path(writer)}/{brand.pk}", {"aliases": ["A"]}, **keyed("k-7"))
    assert patched.status_code == 200
    assert patched.json()["aliases"] == ["A"]
    assert IdempotencyKey.objects.count() == 3


def test_a_patch_is_replayed(writer):
    brand_id = writer.post(brands_path(writer), {"name": "Alpha"}).json()["id"]
    path = f"{brands_path(writer)}/{brand_id}"
    first = writer.patch(path, {"aliases": ["A"]}, **keyed("p-1"))
    assert first.status_code == 200
    # when the brand changed meanwhile and the same keyed PATCH is repeated
    writer.patch(path, {"aliases": ["B"]})
    again = writer.patch(path, {"aliases": ["A"]}, **keyed("p-1"))
    # then the first answer is replayed and the brand is not written again
    assert again.status_code == 200
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Brand.objects.get().aliases == ["B"]


def test_tenancy_refusals_do_not_consume_a_key(writer, reader):
    # when a reader (403) and an anonymous caller (401) use a key
    refused = reader.post(brands_path(reader), {"name": "Alpha"}, **keyed("k-8"))
    anonymous = APIClient().post(
        brands_path(writer), {"name": "Alpha"}, format="json", **keyed("k-8")
    )
    # then nothing is stored
    assert refused.status_code == 403
    assert anonymous.status_code == 401
    assert IdempotencyKey.objects.count() == 0


def test_an_expired_key_is_used_afresh_and_purged_by_beat(writer):
    # given an answered key whose time is up, and one still live
    writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("old"))
    writer.post(brands_path(writer), {"name": "Beta"}, **keyed("new"))
    IdempotencyKey.objects.filter(key="old").update(expires_at=timezone.now())
    # when the beat task runs
    purged = purge_idempotency_keys()
    # then only the expired one is gone
    assert purged == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]


def test_an_expired_key_not_yet_purged_is_claimed_again(writer):
    writer.post(brands_path(writer), {"name": "Alpha"}, **keyed("old"))
    IdempotencyKey.objects.filter(key="old").update(expires_at=timezone.now())
    # when the key is reused after its TTL with another body
    response = writer.post(brands_path(writer), {"name": "Beta"}, **keyed("old"))
    # then it is a new request
    assert response.status_code == 201
    assert response.json()["name"] == "Beta"
    assert IdempotencyKey.objects.get().response_status == 201


def test_the_purge_is_scheduled_by_beat(settings):
    assert settings.CELERY_BEAT_SCHEDULE["serenity-idempotency-purge"] == {
        "task": "serenity.purge_idempotency_keys",
        "schedule": 3600.0,
        "options": {"queue": settings.CELERY_PERIODIC_QUEUE, "expires": 3600.0},
    }


def test_a_get_ignores_the_header(writer):
    response = writer.get(brands_path(writer), **keyed("k-9"))
    assert response.status_code == 200
    assert IdempotencyKey.objects.count() == 0


ASYNC_CREATE = {
    "name": "Alpha",
    "baseUrl": "https://a.example",
    "async": True,
    "semrushMarket": {"market": "US", "languageCode": "en"},
}


def test_an_async_create_replays_the_same_job(sw_writer):
    with mock.patch("jobs.publishing.celery_app.send_task", side_effect=ConnectionError("held")):
        first = sw_writer.post(brands_path(sw_writer), ASYNC_CREATE, **keyed("a-1"))
        again = sw_writer.post(brands_path(sw_writer), ASYNC_CREATE, **keyed("a-1"))
    assert first.status_code == 202, first.json()
    assert again.status_code == 202
    assert again.json() == first.json()
    assert again.json()["jobId"] == first.json()["jobId"]
    assert again["Location"] == first["Location"]
    assert again["Retry-After"] == first["Retry-After"]
    assert again["Idempotent-Replayed"] == "true"
    assert AsyncJob.objects.filter(root__isnull=True).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_keyed_creates_make_one_brand_one_attempt_one_job(sw_writer):
    """The same keyed async create from several threads at once. Exactly one claims the key
    (its INSERT wins the unique constraint) and runs; the others either find the answer
    (replayed) or, while it is still running, get 409 idempotencyKeyInUse and retry until
    they are answered by the replay. Everyone ends with the same answer."""
    threads_count = 6
    barrier = threading.Barrier(threads_count)
    answers: list[tuple[int, dict, str | None, list[int]]] = []
    lock = threading.Lock()

    def client() -> None:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {sw_writer.token}")
        seen: list[int] = []
        try:
            barrier.wait()
            for _ in range(200):
                r = api.post(brands_path(sw_writer), ASYNC_CREATE, format="json", **keyed("c-1"))
                seen.append(r.status_code)
                if r.status_code != 409:
                    break
                assert r.json()["error"] == "idempotencyKeyInUse"
                threading.Event().wait(0.02)
            with lock:
                answers.append((r.status_code, r.json(), r.get("Location"), seen))
        finally:
            connection.close()

    with mock.patch("jobs.publishing.celery_app.send_task", side_effect=ConnectionError("held")):
        threads = [threading.Thread(target=client) for _ in range(threads_count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)

    assert len(answers) == threads_count
    assert {status for status, *_ in answers} == {202}
    assert len({repr(sorted(body.items())) for _, body, _, _ in answers}) == 1
    assert len({location for _, _, location, _ in answers}) == 1
    # every refusal on the way was a 409 idempotencyKeyInUse, never a second brand's 409
    assert all(set(seen[:-1]) <= {409} for *_, seen in answers)
    assert Brand.objects.filter(organization=sw_writer.org).count() == 1
    assert ProvisioningAttempt.objects.count() == 1
    assert AsyncJob.objects.filter(root__isnull=True).count() == 1
    assert str(AsyncJob.objects.get(root__isnull=True).pk) == answers[0][1]["jobId"]
    assert list(IdempotencyKey.objects.values_list("response_status", flat=True)) == [202]
