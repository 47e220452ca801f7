"""The webhook routes (SPEC §11.3): register, list, read, delete; their refusals."""

from __future__ import annotations

import base64
import re

import pytest

from tests.conftest import make_caller
from tests.factories import OrganizationFactory
from tests.support import assert_error
from tests.webhooks.helpers import register, webhooks_path
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db

ALL_EVENTS = [
    "job.completed",
    "job.failed",
    "job.cancelled",
    "onboarding.completed",
    "onboarding.cancelled",
    "drift.detected",
    "drift.repaired",
    "credential.refused",
]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def test_register_answers_the_secret_once_and_stores_it_encrypted(writer, allow_private):
    # when
    response = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:9/hook"})
    # then
    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) == {
        "id",
        "url",
        "events",
        "enabled",
        "disabledReason",
        "description",
        "secret",
        "createdAt",
    }
    assert (body["enabled"], body["description"]) == (True, "")
    assert body["url"] == "http://127.0.0.1:9/hook"
    assert body["events"] == ALL_EVENTS
    assert ISO.match(body["createdAt"])
    assert body["secret"].startswith("whsec_")
    assert len(base64.b64decode(body["secret"].removeprefix("whsec_"))) == 32
    stored = Webhook.objects.get(pk=body["id"])
    assert body["secret"] not in stored.secret_encrypted
    assert body["secret"].removeprefix("whsec_") not in stored.secret_encrypted
    assert stored.secret() == body["secret"]
    # and no read shows it again
    listed = writer.get(webhooks_path(writer)).json()
    assert listed == {
        "items": [{k: v for k, v in body.items() if k != "secret"}],
        "nextCursor": None,
    }
    one = writer.get(f"{webhooks_path(writer)}/{body['id']}").json()
    assert one == {k: v for k, v in body.items() if k != "secret"}


def test_register_with_chosen_events(writer, allow_private):
    body = register(writer, "http://127.0.0.1:9/", events=["job.failed", "job.failed"])
    assert body["events"] == ["job.failed"]


@pytest.mark.parametrize(
    "events", [[], ["job.started"], "job.failed", [1]], ids=["empty", "unknown", "string", "number"]
)
def test_bad_events_are_refused(writer, allow_private, events):
    response = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:9/", "events": events})
    assert_error(response, 400, "invalidRequest")
    assert Webhook.objects.count() == 0


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.example.com/x",  # http:// without private addresses allowed
        "ftp://hooks.example.com/x",
        "https://",
        "not a url",
        "https://user:pw@hooks.example.com/x",
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://172.16.0.1/hook",
        "https://192.168.1.1/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[fe80::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://224.0.0.1/hook",
        "https://240.0.0.1/hook",
        "https://0.0.0.0/hook",
        "https://100.64.0.1/hook",
        "https://localhost/hook",
        "https://" + "a" * 2040 + ".com/",
    ],
)
def test_urls_that_may_not_be_called_are_refused_naming_url(writer, url):
    response = writer.post(webhooks_path(writer), {"url": url})
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["error"] == "invalidRequest"
    assert body["message"].startswith("url")
    assert Webhook.objects.count() == 0


def test_a_public_address_is_accepted(writer):
    # An address literal: no DNS needed (the test machine has no internet).
    body = register(writer, "https://93.184.215.14/hook")
    assert body["url"] == "https://93.184.215.14/hook"


def test_an_eleventh_webhook_is_refused(writer, allow_private):
    for n in range(10):
        register(writer, f"http://127.0.0.1:9/{n}")
    response = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:9/11"})
    assert_error(response, 400, "invalidRequest")
    assert Webhook.objects.filter(organization=writer.org).count() == 10


def test_list_is_paginated_newest_first(writer, allow_private):
    ids = [register(writer, f"http://127.0.0.1:9/{n}")["id"] for n in range(3)]
    first = writer.get(f"{webhooks_path(writer)}?limit=2").json()
    assert [w["id"] for w in first["items"]] == ids[::-1][:2]
    second = writer.get(f"{webhooks_path(writer)}?limit=2&cursor={first['nextCursor']}").json()
    assert [w["id"] for w in second["items"]] == [ids[0]]
    assert second["nextCursor"] is None
    assert_error(writer.get(f"{webhooks_path(writer)}?cursor=nope"), 400, "invalidRequest")


def test_delete_then_404(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/")
    path = f"{webhooks_path(writer)}/{hook['id']}"
    assert writer.delete(path).status_code == 204
    assert_error(writer.get(path), 404, "webhookNotFound")
    assert_error(writer.delete(path), 404, "webhookNotFound")


def test_another_orgs_webhook_is_not_found(writer, allow_private):
    other = make_caller(OrganizationFactory())
    hook = register(other, "http://127.0.0.1:9/")
    path = f"{webhooks_path(writer)}/{hook['id']}"
    assert_error(writer.get(path), 404, "webhookNotFound")
    assert_error(writer.delete(path), 404, "webhookNotFound")
    assert_error(writer.get(f"{path}/deliveries"), 404, "webhookNotFound")
    assert_error(writer.post(f"{path}/deliveries/{hook['id']}/redeliver"), 404, "webhookNotFound")
    assert Webhook.objects.filter(pk=hook["id"]).exists()


def test_path_ids_are_checked_before_lookups(writer):
    assert_error(writer.get(f"{webhooks_path(writer)}/not-a-uuid"), 400, "invalidRequest")


def test_a_reader_may_list_but_not_register(reader, allow_private):
    assert reader.get(webhooks_path(reader)).status_code == 200
    response = reader.post(webhooks_path(reader), {"url": "http://127.0.0.1:9/"})
    assert_error(response, 403, "forbidden")


def test_register_is_idempotent_with_a_key(writer, allow_private):
    headers = {"HTTP_IDEMPOTENCY_KEY": "hook-1"}
    first = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:9/"}, **headers)
    again = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:9/"}, **headers)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Webhook.objects.count() == 1


def test_a_refused_register_replays_its_refusal_with_the_same_key(writer, allow_private):
    # given a register refused for its URL, under a key
    headers = {"HTTP_IDEMPOTENCY_KEY": "hook-refused"}
    body = {"url": "https://+%4a=%3e%79:65507/x", "events": ["job.failed"]}
    first = writer.post(webhooks_path(writer), body, **headers)
    # when the same request is sent again with the key
    again = writer.post(webhooks_path(writer), body, **headers)
    # then the same 400 is answered again (no secret to re-read), and nothing was written
    assert first.status_code == again.status_code == 400
    assert (
        again.json()
        == first.json()
        == {
            "error": "invalidRequest",
            "message": "url: the host does not resolve.",
            "details": {"field": "url"},
        }
    )
    assert again["Idempotent-Replayed"] == "true"
    assert Webhook.objects.count() == 0


# --- one delivery (SPEC §13.6) --------------------------------------------------------------------


def test_a_reader_reads_one_delivery_as_the_list_shows_it(writer, reader, allow_private):
    from webhooks.services import webhook_event_publish

    hook = register(writer, "http://127.0.0.1:9/hook")
    [delivery_id] = webhook_event_publish(
        organization_id=writer.org.id, type="onboarding.completed", data={}
    )
    path = f"{webhooks_path(reader)}/{hook['id']}/deliveries"
    [listed] = reader.get(path).json()["items"]
    # when
    response = reader.get(f"{path}/{delivery_id}")
    # then
    assert (response.status_code, response.json()) == (200, listed)
    assert listed["id"] == str(delivery_id)


def test_another_orgs_or_endpoints_delivery_is_not_found(writer, allow_private):
    from webhooks.services import webhook_event_publish

    other = make_caller(OrganizationFactory())
    theirs = register(other, "http://127.0.0.1:9/theirs")
    [their_delivery] = webhook_event_publish(
        organization_id=other.org.id, type="onboarding.completed", data={}
    )
    ours = register(writer, "http://127.0.0.1:9/ours")
    # another org's endpoint and delivery
    path = f"{webhooks_path(writer)}/{theirs['id']}/deliveries/{their_delivery}"
    assert_error(writer.get(path), 404, "webhookNotFound")
    # another org's delivery under our endpoint
    path = f"{webhooks_path(writer)}/{ours['id']}/deliveries/{their_delivery}"
    assert_error(writer.get(path), 404, "webhookNotFound")
    # an unknown delivery
    path = f"{webhooks_path(writer)}/{ours['id']}/deliveries/{ours['id']}"
    assert_error(writer.get(path), 404, "webhookNotFound")
    # a malformed id
    path = f"{webhooks_path(writer)}/{ours['id']}/deliveries/not-a-uuid"
    assert_error(writer.get(path), 400, "invalidRequest")
