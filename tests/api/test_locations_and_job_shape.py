"""SPEC §13.6: a `Location` header on every 201 and every 202 (documented on each, so that the
conformance check under every test asserts it); one job document wherever a job is shown (the
poll, a brand's and an org's lists, a webhook event's `data`), a list item being the poll
document without `steps`."""

from __future__ import annotations

import json
from typing import Any

from tests.api.test_answers_conform import brands_path, finish_chain, serenity_path
from tests.conformance import ServedDocument
from webhooks.models import WebhookDelivery


def test_every_201_and_202_documents_a_required_location(served_document: ServedDocument):
    found = 0
    for path, item in served_document.document["paths"].items():
        for method, operation in item.items():
            for status in ("201", "202"):
                if status in operation.get("responses", {}):
                    found += 1
                    headers = operation["responses"][status].get("headers", {})
                    assert headers.get("Location", {}).get("required") is True, (
                        method,
                        path,
                        status,
                    )
    assert found >= 10


def test_created_and_accepted_answers_say_where(sw_writer: Any, sim: Any, settings: Any) -> None:
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    sim.configure({"settleSeconds": 0})
    org = f"/v2/orgs/{sw_writer.org.id}"
    # a webhook: 201 at its path, its test and a redelivery: 202 at the delivery's path
    hook = sw_writer.post(f"{org}/serenity/webhooks", {"url": "http://127.0.0.1:9/h"})
    assert hook.status_code == 201
    assert hook["Location"] == f"{org}/serenity/webhooks/{hook.json()['id']}"
    assert sw_writer.get(hook["Location"]).json()["id"] == hook.json()["id"]
    test = sw_writer.post(f"{hook['Location']}/test")
    assert test.status_code == 202
    assert test["Location"] == f"{hook['Location']}/deliveries/{test.json()['id']}"
    again = sw_writer.post(f"{test['Location']}/redeliver")
    assert again.status_code == 202
    assert again["Location"] == test["Location"]
    # a sync brand create: 201 at the brand's path
    brand = sw_writer.post(brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"})
    assert brand.status_code == 201
    assert brand["Location"] == f"{brands_path(sw_writer)}/{brand.json()['id']}"
    assert sw_writer.get(brand["Location"]).json()["id"] == brand.json()["id"]
    # a sync market create: 201 at the market's path
    serenity = serenity_path(sw_writer, brand.json()["id"])
    market = sw_writer.post(f"{serenity}/markets", {"market": "US", "languageCode": "en"})
    assert market.status_code == 201, market.json()
    assert market["Location"] == f"{serenity}/markets/2840/en"
    assert sw_writer.get(market["Location"]).status_code == 200


def test_a_job_is_one_document_wherever_it_is_shown(
    sw_writer: Any, sim: Any, settings: Any
) -> None:
    settings.SERENITY_WEBHOOK_ALLOW_PRIVATE = True
    sim.configure({"settleSeconds": 0})
    org = f"/v2/orgs/{sw_writer.org.id}"
    assert (
        sw_writer.post(f"{org}/serenity/webhooks", {"url": "http://127.0.0.1:9/h"}).status_code
        == 201
    )
    brand = sw_writer.post(brands_path(sw_writer), {"name": "Acme", "baseUrl": "https://a.example"})
    serenity = serenity_path(sw_writer, brand.json()["id"])
    accepted = sw_writer.post(
        f"{serenity}/markets", {"market": "US", "languageCode": "en", "async": True}
    )
    assert accepted.status_code == 202
    finish_chain(accepted.json()["jobId"])
    # the poll
    poll = sw_writer.get(accepted["Location"]).json()
    assert poll["brandId"] == brand.json()["id"]
    steps = poll.pop("steps")
    assert steps
    # the lists and the event: the poll document without `steps`
    # (the brand's sync create left its job too, `mode: sync`, with no event: SPEC §13.5)
    brand_items = sw_writer.get(f"{serenity}/jobs").json()["items"]
    org_items = sw_writer.get(f"{org}/serenity/jobs").json()["items"]
    assert [i["mode"] for i in brand_items] == ["async", "sync"]
    assert [i["mode"] for i in org_items] == ["async", "sync"]
    brand_item, org_item = brand_items[0], org_items[0]
    [by_org_path] = [sw_writer.get(f"{org}/serenity/jobs/{poll['jobId']}").json()]
    by_org_path.pop("steps")
    [event] = [json.loads(d.body) for d in WebhookDelivery.objects.all()]
    assert event["type"] == "job.completed"
    assert brand_item == poll
    assert org_item == poll
    assert by_org_path == poll
    assert event["data"] == poll
