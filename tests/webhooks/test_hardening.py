"""Webhooks cannot be turned against the service (SPEC §12.4): an attempt's wall-clock
deadline and its lease, what `lastError` tells, ports and tunnelled addresses, no secret at
rest, the per-org pending cap, auto-disable, a deleted endpoint's jobs; and deliveries on their
own queue (§12.5). Attempts run in this process, as a worker runs them (`jobs.runner`)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from jobs.dispatch import jobs_dispatch_due
from jobs.models import AsyncJob, JobStatus
from jobs.services import task_name_for
from tests.conftest import make_caller
from tests.factories import OrganizationFactory
from tests.webhooks.helpers import register, run_delivery, webhooks_path
from webhooks.addresses import address_is_public
from webhooks.models import Webhook, WebhookAttempt, WebhookDelivery
from webhooks.services import DELIVERY_JOB_TYPE, DELIVERY_STEP, webhook_event_publish

pytestmark = pytest.mark.django_db

DATA = {"onboardingId": "0f6b0d1e-6f4c-4d0e-9f0a-1a2b3c4d5e6f", "status": "COMPLETED"}


def publish(org: Any) -> WebhookDelivery:
    [delivery_id] = webhook_event_publish(
        organization_id=org.id, type="onboarding.completed", data=DATA
    )
    return WebhookDelivery.objects.get(pk=delivery_id)


# --- the attempt's deadline and lease ------------------------------------------------------------


@dataclass
class Dripper:
    """A receiver that answers `200 OK` and then one header line every `interval` seconds."""

    url: str
    connections: int = 0
    cut_off: threading.Event = field(default_factory=threading.Event)


@contextmanager
def dripping_receiver(*, interval: float, lines: int) -> Iterator[Dripper]:
    server = socket.create_server(("127.0.0.1", 0))
    dripper = Dripper(url=f"http://127.0.0.1:{server.getsockname()[1]}/hook")

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            dripper.connections += 1
            with conn:
                conn.recv(65536)
                try:
                    conn.sendall(b"HTTP/1.1 200 OK\r\n")
                    for i in range(lines):
                        time.sleep(interval)
                        conn.sendall(f"X-Drip-{i}: {i}\r\n".encode())
                    conn.sendall(b"Content-Length: 0\r\n\r\n")
                except OSError:
                    dripper.cut_off.set()  # the sender shut the connection

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield dripper
    thread.join(timeout=30)


def test_a_dripping_receiver_is_cut_off_at_the_deadline_and_recorded_once(
    writer, allow_private, published_jobs, settings
):
    # given a receiver that would drip headers for 20 s, and a 0.5 s deadline
    settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 0.5
    with dripping_receiver(interval=0.1, lines=200) as dripper:
        register(writer, dripper.url)
        # when the attempt runs
        delivery = run_delivery(publish(writer.org))
        # then the sender shut the connection while headers were still coming
        assert dripper.cut_off.wait(timeout=10)
    assert dripper.connections == 1
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, None)
    assert delivery.last_error == "timeout"
    assert list(WebhookAttempt.objects.values_list("status_code", "error")) == [(None, "timeout")]


@pytest.mark.django_db(transaction=True)
def test_the_lease_outlives_a_running_attempt_so_it_is_never_started_twice(
    writer, allow_private, receiver, published_jobs, settings
):
    # given leases that expire at once, and a receiver that holds the attempt a while
    settings.JOBS_LEASE_SECONDS = 0.0
    receiver.holds = [1.0]
    register(writer, receiver.url)
    delivery = publish(writer.org)
    attempt = threading.Thread(target=_run_and_close, args=(delivery,))
    attempt.start()
    try:
        receiver.wait_for(1, arrived=True)
        # when the dispatcher looks for jobs whose worker died, while the attempt runs
        with mock.patch("jobs.dispatch.publish_job", return_value=True) as republish:
            jobs_dispatch_due()
        # then the attempt's job is not among them: its lease was extended past the deadline
        job = AsyncJob.objects.get(pk=delivery.job_id)
        deadline = settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS
        assert job.lease_expires_at > timezone.now() + timedelta(seconds=deadline)
        assert republish.call_count == 0
    finally:
        attempt.join(timeout=30)
    # and the 2xx is recorded, once
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 204)
    assert WebhookAttempt.objects.filter(delivery=delivery).count() == 1
    assert len(receiver.arrivals) == 1
    assert AsyncJob.objects.get(pk=delivery.job_id).status == JobStatus.COMPLETED


def _run_and_close(delivery: WebhookDelivery) -> None:
    try:
        run_delivery(delivery)
    finally:
        connection.close()


def test_a_closed_port_is_a_connection_that_failed(writer, allow_private, published_jobs):
    # given an endpoint on a port nothing listens on
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    register(writer, f"http://127.0.0.1:{port}/hook")
    # when the attempt runs
    delivery = run_delivery(publish(writer.org))
    # then the client learns only that the connection failed
    assert (delivery.attempts, delivery.last_status_code, delivery.last_error) == (
        1,
        None,
        "connection failed",
    )


def test_an_answer_other_than_2xx_is_told_by_its_status_only(
    writer, allow_private, receiver, published_jobs
):
    receiver.default_status = 503
    register(writer, receiver.url)
    delivery = run_delivery(publish(writer.org))
    assert (delivery.last_status_code, delivery.last_error) == (503, "answered 503")


# --- what a URL may name -------------------------------------------------------------------------

NON_PUBLIC = "url: the host resolves to a non-public address."


@pytest.mark.parametrize(
    ("resolved", "url", "message"),
    [
        ("2002:7f00:1::1", "https://hooks.example.com/hook", NON_PUBLIC),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "https://hooks.example.com/hook", NON_PUBLIC),  # 169.254.169.254
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "https://hooks.example.com/", NON_PUBLIC),
        ("fec0::1", "https://hooks.example.com/hook", NON_PUBLIC),
        ("192.0.0.8", "https://hooks.example.com/hook", NON_PUBLIC),
        ("3fff::1", "https://hooks.example.com/hook", NON_PUBLIC),
        (
            "93.184.215.14",
            "https://hooks.example.com:22/hook",
            "url: an https:// URL may only name port 443.",
        ),
        (
            "93.184.215.14",
            "https://hooks.example.com:8443/hook",
            "url: an https:// URL may only name port 443.",
        ),
    ],
)
def test_tunnelled_addresses_and_other_ports_are_refused(
    writer, settings, monkeypatch, resolved, url, message
):
    # given the name resolves to `resolved` (a 6to4 or Teredo form, or a public address)
    family = socket.AF_INET6 if ":" in resolved else socket.AF_INET
    answer = [(family, socket.SOCK_STREAM, 6, "", (resolved, 443))]
    monkeypatch.setattr("webhooks.addresses.socket.getaddrinfo", lambda *a, **k: answer)
    settings.WEBHOOK_STANDARD_PORTS_ONLY = True
    # when
    response = writer.post(webhooks_path(writer), {"url": url})
    # then
    assert (response.status_code, response.json()) == (
        400,
        {"error": "invalidRequest", "message": message, "details": {"field": "url"}},
    )
    assert not Webhook.objects.exists()


def test_http_names_port_80_only_where_private_addresses_are_allowed(
    writer, allow_private, settings
):
    settings.WEBHOOK_STANDARD_PORTS_ONLY = True
    refused = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:8080/hook"})
    assert (refused.status_code, refused.json()) == (
        400,
        {
            "error": "invalidRequest",
            "message": "url: an http:// URL may only name port 80.",
            "details": {"field": "url"},
        },
    )
    assert not Webhook.objects.exists()
    accepted = writer.post(webhooks_path(writer), {"url": "http://127.0.0.1:80/hook"})
    assert accepted.status_code == 201


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("2002:0808:0808::1", False),  # 6to4 (a special-purpose range), whatever it carries
        ("2002:0a00:0001::1", False),  # 6to4 of 10.0.0.1
        ("2002:7f00:0001::1", False),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo, whatever it carries
        ("::ffff:169.254.169.254", False),
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1
        ("2606:4700:4700::1111", True),
    ],
)
def test_addresses_that_carry_an_ipv4_are_judged_by_it(address, public):
    import ipaddress

    assert address_is_public(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize(
    ("address", "public"),
    [
        # named by SPEC §13.6 (they passed the check)
        ("fec0::1", False),
        ("192.0.0.8", False),
        ("192.0.0.170", False),
        ("3fff::1", False),
        ("3fff:fff:ffff::1", False),
        # more of IANA's registries
        ("192.31.196.1", False),
        ("192.52.193.1", False),
        ("192.175.48.1", False),
        ("198.18.0.1", False),
        ("192.88.99.1", False),
        ("100::1", False),
        ("100:0:0:1::1", False),
        ("2001:2::1", False),
        ("2001:20::1", False),
        ("2620:4f:8000::1", False),
        ("5f00::1", False),
        ("64:ff9b:1::1", False),
        ("::ffff:10.0.0.1", False),
        ("::8.8.8.8", False),  # IPv4-compatible (deprecated), outside 2000::/3
        ("4000::1", False),  # outside 2000::/3
        # public
        ("8.8.8.8", True),
        ("93.184.215.14", True),
        ("::ffff:8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("2a00:1450:4001:80b::200e", True),
    ],
)
def test_every_special_purpose_range_is_refused(address, public):
    import ipaddress

    assert address_is_public(ipaddress.ip_address(address)) is public


def test_the_table_refuses_the_first_and_last_address_of_each_range():
    import ipaddress

    from webhooks.addresses import SPECIAL_PURPOSE

    for network, name in SPECIAL_PURPOSE:
        block = ipaddress.ip_network(network)
        for address in (block[0], block[-1]):
            assert not address_is_public(address), (network, name, address)


# --- no secret at rest ---------------------------------------------------------------------------


def tables_holding(text: str) -> list[str]:
    """Every table of the test database with a row whose text (all columns) contains `text`."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            quoted = connection.ops.quote_name(table)
            cursor.execute(f"SELECT 1 FROM {quoted} AS r WHERE strpos(r::text, %s) > 0", [text])
            if cursor.fetchone():
                found.append(table)
    return found


def test_an_idempotent_registration_stores_no_secret_and_replays_it(writer, allow_private):
    key = {"HTTP_IDEMPOTENCY_KEY": "hook-1"}
    body = {"url": "http://127.0.0.1:9/hook"}
    # when
    first = writer.post(webhooks_path(writer), body, **key)
    assert first.status_code == 201
    secret = first.json()["secret"]
    # then no table holds it (its encrypted form only)
    assert tables_holding(secret.removeprefix("whsec_")) == []
    # and the replay answers it, read again from the encrypted column
    replay = writer.post(webhooks_path(writer), body, **key)
    assert (replay.status_code, replay.json(), replay.headers["Idempotent-Replayed"]) == (
        201,
        first.json(),
        "true",
    )


def test_an_idempotent_rotation_stores_no_secret_and_replays_it(writer, allow_private):
    hook = register(writer, "http://127.0.0.1:9/hook")
    path = f"{webhooks_path(writer)}/{hook['id']}/rotate-secret"
    key = {"HTTP_IDEMPOTENCY_KEY": "rotate-1"}
    first = writer.post(path, {}, **key)
    assert first.status_code == 200
    secret = first.json()["secret"]
    assert secret != hook["secret"]
    assert tables_holding(secret.removeprefix("whsec_")) == []
    assert tables_holding(hook["secret"].removeprefix("whsec_")) == []
    replay = writer.post(path, {}, **key)
    assert (replay.status_code, replay.json()) == (200, first.json())


# --- bounds: the pending cap, auto-disable, deletion ---------------------------------------------


def test_past_the_cap_the_oldest_pending_deliveries_fail_as_overflow(
    writer, allow_private, receiver, published_jobs, settings
):
    # given a cap of 3, and another org with a pending delivery of its own
    settings.WEBHOOK_PENDING_MAX_PER_ORG = 3
    other = make_caller(OrganizationFactory())
    register(other, receiver.url)
    theirs = publish(other.org)
    register(writer, receiver.url)
    # when five events happen
    ours = [publish(writer.org) for _ in range(5)]
    # then the two oldest ended `failed` (`overflow`), their jobs with them
    rows = {d.pk: d for d in WebhookDelivery.objects.all()}
    assert [(rows[d.pk].status, rows[d.pk].last_error) for d in ours] == [
        ("failed", "overflow"),
        ("failed", "overflow"),
        ("pending", None),
        ("pending", None),
        ("pending", None),
    ]
    jobs = dict(AsyncJob.objects.values_list("id", "status"))
    assert [jobs[d.job_id] for d in ours] == [
        JobStatus.CANCELLED,
        JobStatus.CANCELLED,
        JobStatus.IN_PROGRESS,
        JobStatus.IN_PROGRESS,
        JobStatus.IN_PROGRESS,
    ]
    # and the other org's delivery is not counted with ours
    assert (rows[theirs.pk].status, jobs[theirs.job_id]) == ("pending", JobStatus.IN_PROGRESS)


def test_an_endpoint_failing_every_attempt_for_24_hours_is_disabled(
    writer, allow_private, receiver, published_jobs
):
    hook = register(writer, receiver.url)
    path = f"{webhooks_path(writer)}/{hook['id']}"
    receiver.default_status = 500
    delivery = run_delivery(publish(writer.org))
    # a first failure: still enabled, failing since that attempt
    webhook = Webhook.objects.get(pk=hook["id"])
    assert (webhook.enabled, webhook.disabled_reason) == (True, None)
    assert webhook.failing_since is not None
    # given it has failed every attempt for 24 h and a second
    Webhook.objects.filter(pk=hook["id"]).update(
        failing_since=timezone.now() - timedelta(hours=24, seconds=1)
    )
    # when the next attempt fails too
    run_delivery(delivery)
    # then it is disabled, with its reason, and gets no new deliveries
    answer = writer.get(path).json()
    assert (answer["enabled"], answer["disabledReason"]) == (False, "every attempt failed for 24 h")
    assert (
        webhook_event_publish(organization_id=writer.org.id, type="onboarding.completed", data=DATA)
        == []
    )
    # and enabling it again clears the reason
    enabled = writer.patch(path, {"enabled": True}).json()
    assert (enabled["enabled"], enabled["disabledReason"]) == (True, None)
    assert Webhook.objects.get(pk=hook["id"]).failing_since is None


def test_a_delivered_attempt_ends_the_failing_period(
    writer, allow_private, receiver, published_jobs
):
    hook = register(writer, receiver.url)
    receiver.script = [500]
    delivery = run_delivery(publish(writer.org))
    assert Webhook.objects.get(pk=hook["id"]).failing_since is not None
    delivery = run_delivery(delivery)
    assert delivery.status == "delivered"
    assert Webhook.objects.get(pk=hook["id"]).failing_since is None


def test_a_deleted_endpoint_ends_its_pending_deliveries_jobs(
    writer, allow_private, receiver, published_jobs
):
    hook = register(writer, receiver.url)
    deliveries = [publish(writer.org) for _ in range(3)]
    # when
    response = writer.delete(f"{webhooks_path(writer)}/{hook['id']}")
    # then no delivery job is left to run
    assert response.status_code == 204
    statuses = AsyncJob.objects.filter(pk__in=[d.job_id for d in deliveries]).values_list(
        "status", flat=True
    )
    assert list(statuses) == [JobStatus.CANCELLED] * 3
    assert not AsyncJob.objects.filter(
        job_type=DELIVERY_JOB_TYPE, status=JobStatus.IN_PROGRESS
    ).exists()
    assert not WebhookDelivery.objects.exists()


# --- isolation -----------------------------------------------------------------------------------


def test_deliveries_go_to_their_own_queue_and_steps_to_the_default_one(settings):
    router = celery_app.amqp.router
    delivery = router.route({}, task_name_for(DELIVERY_STEP))
    step = router.route({}, task_name_for("brandCreate"))
    assert delivery["queue"].name == settings.CELERY_WEBHOOK_QUEUE
    assert step["queue"].name == settings.CELERY_TASK_DEFAULT_QUEUE
    assert settings.CELERY_WEBHOOK_QUEUE != settings.CELERY_TASK_DEFAULT_QUEUE


# --- replays answer what they first answered (SPEC §13.6) ----------------------------------------


def test_a_replayed_rotation_answers_the_secret_it_issued_not_the_current_one(
    writer, allow_private
):
    hook = register(writer, "http://127.0.0.1:9/hook")
    path = f"{webhooks_path(writer)}/{hook['id']}/rotate-secret"
    first = writer.post(path, {}, HTTP_IDEMPOTENCY_KEY="rotate-1")
    # given a second rotation since (another key)
    second = writer.post(path, {}, HTTP_IDEMPOTENCY_KEY="rotate-2")
    assert first.json()["secret"] != second.json()["secret"]
    # when the first is replayed
    replay = writer.post(path, {}, HTTP_IDEMPOTENCY_KEY="rotate-1")
    # then it answers what it answered, and no table holds either secret in the clear
    assert (replay.status_code, replay.json(), replay.headers["Idempotent-Replayed"]) == (
        200,
        first.json(),
        "true",
    )
    for answer in (first, second):
        assert tables_holding(answer.json()["secret"].removeprefix("whsec_")) == []


def test_a_replayed_registration_answers_as_stored_after_the_endpoint_was_deleted(
    writer, allow_private
):
    key = {"HTTP_IDEMPOTENCY_KEY": "hook-gone"}
    body = {"url": "http://127.0.0.1:9/hook"}
    first = writer.post(webhooks_path(writer), body, **key)
    assert first.status_code == 201
    assert writer.delete(f"{webhooks_path(writer)}/{first.json()['id']}").status_code == 204
    # when the registration is replayed
    replay = writer.post(webhooks_path(writer), body, **key)
    # then it answers as stored (nothing registered again)
    assert (replay.status_code, replay.json()) == (201, first.json())
    assert not Webhook.objects.exists()


def test_a_replayed_rotation_answers_as_stored_after_the_endpoint_was_deleted(
    writer, allow_private
):
    hook = register(writer, "http://127.0.0.1:9/hook")
    path = f"{webhooks_path(writer)}/{hook['id']}/rotate-secret"
    first = writer.post(path, {}, HTTP_IDEMPOTENCY_KEY="rotate-gone")
    assert writer.delete(f"{webhooks_path(writer)}/{hook['id']}").status_code == 204
    replay = writer.post(path, {}, HTTP_IDEMPOTENCY_KEY="rotate-gone")
    assert (replay.status_code, replay.json()) == (200, first.json())
