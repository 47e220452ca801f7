"""One org's webhooks never stall another's, and never take a worker's pool (SPEC §13.6,
§13.7; issues 43, 44): an org's attempts in flight are capped, a delivery's message runs the
fairest due attempt (another org's first goes before one org's backlog), and a worker runs at
most its share of attempts at once. Messages are taken in the broker's order by threads that
run the delivery task as a worker does; the receivers are real."""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from jobs.models import AsyncJob
from tests.conftest import make_caller
from tests.factories import OrganizationFactory
from tests.webhooks.helpers import register
from tests.webhooks.receiver import receiver_start
from webhooks.models import DeliveryStatus, WebhookDelivery
from webhooks.services import (
    DELIVERY_STEP,
    Event,
    webhook_event_publish,
    webhook_events_publish,
)
from webhooks.slots import worker_share
from webhooks.tasks import deliver_webhook

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class GatedReceiver:
    """Holds every request until `gate` is set; counts the requests in flight."""

    server: ThreadingHTTPServer
    gate: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    most_in_flight: int = 0
    arrived: int = 0
    arrival: threading.Condition = field(default_factory=threading.Condition)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def wait_arrived(self, count: int, timeout: float = 30.0) -> None:
        with self.arrival:
            assert self.arrival.wait_for(lambda: self.arrived >= count, timeout=timeout), (
                f"{self.arrived} arrived, {count} expected"
            )


@contextmanager
def gated_receiver() -> Iterator[GatedReceiver]:
    holder: dict[str, GatedReceiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver = holder["receiver"]
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with receiver.lock:
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
            with receiver.arrival:
                receiver.arrived += 1
                receiver.arrival.notify_all()
            receiver.gate.wait(timeout=30)
            with receiver.lock:
                receiver.in_flight -= 1
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver = GatedReceiver(server=server)
    holder["receiver"] = receiver
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield receiver
    finally:
        receiver.gate.set()
        server.shutdown()
        server.server_close()


class Consumers:
    """`count` worker threads taking the messages (job ids) in order and running the delivery
    task for each, as a worker with `pool_slots` slots does."""

    def __init__(self, messages: list[str], *, count: int) -> None:
        self.messages = deque(messages)
        self.taken = 0
        self.ran_by: list[str] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._consume) for _ in range(count)]

    def _consume(self) -> None:
        try:
            while True:
                with self.lock:
                    if not self.messages:
                        return
                    job_id = self.messages.popleft()
                    self.taken += 1
                deliver_webhook.apply(args=[job_id], throw=True)
        finally:
            connection.close()

    def start(self) -> Consumers:
        for thread in self.threads:
            thread.start()
        return self

    def wait_running(self, count: int, timeout: float = 30.0) -> None:
        """Until only `count` threads still run (the others ended their messages)."""
        for _ in range(int(timeout / 0.02)):
            if sum(thread.is_alive() for thread in self.threads) <= count:
                return
            threading.Event().wait(0.02)
        raise AssertionError("the threads did not end")

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)
            assert not thread.is_alive()


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set the pool of the worker the delivery task runs in."""

    def set_pool(slots: int, *, webhooks_only: bool) -> None:
        monkeypatch.setattr(
            "webhooks.tasks._pool", {"slots": slots, "webhooks_only": webhooks_only}
        )

    return set_pool


def messages_of(published_jobs: list[tuple[str, float]]) -> list[str]:
    return [job_id for job_id, _ in published_jobs]


def publish_to_one(org: Any) -> uuid.UUID:
    [delivery_id] = webhook_event_publish(
        organization_id=org.id, type="onboarding.completed", data={"status": "COMPLETED"}
    )
    return delivery_id


def test_another_orgs_first_attempt_goes_before_one_orgs_backlog(
    writer, allow_private, receiver, published_jobs, settings, pool
):
    # given a worker consuming the webhook queue alone (16 threads: four take messages here),
    # and an org with 1,000 pending deliveries to 10 endpoints that never answer
    settings.WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 3.0
    pool(16, webhooks_only=True)
    silent = receiver_start(delay_seconds=120)
    consumers = None
    try:
        for _ in range(10):
            register(writer, silent.url)
        events = [
            Event(type="onboarding.completed", data={"n": n}, event_id=uuid.uuid4())
            for n in range(100)
        ]
        ours = webhook_events_publish(organization_id=writer.org.id, events=events)
        assert len(ours) == 1000
        # (two messages start them; the rest are left to the loops, the dispatcher's backstop
        # an hour away)
        later = timezone.now() + timedelta(minutes=30)
        assert AsyncJob.objects.filter(pk__in=ours[2:], published_at__lt=later).count() == 0
        # and then another org's first event
        other = make_caller(OrganizationFactory())
        register(other, receiver.url)
        theirs = publish_to_one(other.org)
        assert WebhookDelivery.objects.get(pk=theirs).job_id == theirs
        # when the worker takes a message per delivery in the queue's order, theirs last (the
        # worst case: a message for each of ours is ahead of theirs, as when published one per
        # event or again by the dispatcher)
        messages = [str(job_id) for job_id in ours] + [str(theirs)]
        consumers = Consumers(messages, count=4).start()
        # then the other org's attempt is made by one of the first messages taken
        receiver.wait_for(1)
        with consumers.lock:
            taken = consumers.taken
        assert taken <= 10
        # while the first org had at most two attempts in flight
        assert len(silent.arrivals) <= settings.WEBHOOK_ATTEMPTS_PER_ORG
    finally:
        # (the first org's backlog is put off so that the loops running it end)
        AsyncJob.objects.filter(step=DELIVERY_STEP, organization_id=writer.org.id).update(
            run_after=None
        )
        if consumers is not None:
            consumers.join()
        silent.stop()
    delivered = WebhookDelivery.objects.get(pk=theirs)
    assert (delivered.status, delivered.attempts) == (DeliveryStatus.DELIVERED, 1)


def test_an_orgs_attempts_in_flight_are_capped(allow_private, published_jobs, settings, pool):
    # given one org's five deliveries to a receiver that holds each request, and five threads
    pool(16, webhooks_only=True)
    org = OrganizationFactory()
    with gated_receiver() as gated:
        register(make_caller(org), gated.url)
        for _ in range(5):
            publish_to_one(org)
        consumers = Consumers(messages_of(published_jobs), count=5).start()
        # when two attempts are in flight, the other three messages end without attempting
        gated.wait_arrived(2)
        consumers.wait_running(2)
        # then no third attempt started meanwhile; released, the two loops deliver the rest
        assert gated.arrived == 2
        gated.gate.set()
        consumers.join()
    assert gated.most_in_flight == settings.WEBHOOK_ATTEMPTS_PER_ORG == 2
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}


def test_attempts_in_flight_never_exceed_the_workers_share_of_its_pool(
    allow_private, published_jobs, pool
):
    # given one worker consuming every queue with 4 slots (its share: 2), and four orgs'
    # deliveries (the org cap does not bind) to a receiver that holds each request
    pool(4, webhooks_only=False)
    with gated_receiver() as gated:
        for _ in range(4):
            org = OrganizationFactory()
            register(make_caller(org), gated.url)
            publish_to_one(org)
        # when its four slots each take a message
        consumers = Consumers(messages_of(published_jobs), count=4).start()
        gated.wait_arrived(2)
        consumers.wait_running(2)
        # then two attempts run and the other two messages left their slots to steps
        assert gated.arrived == 2
        gated.gate.set()
        consumers.join()
    # and the running ones went on to the rest
    assert gated.most_in_flight == 2
    assert set(WebhookDelivery.objects.values_list("status", flat=True)) == {"delivered"}


@pytest.mark.parametrize(
    ("slots", "webhooks_only", "share"),
    [(16, False, 8), (2, False, 1), (1, False, 1), (3, False, 1), (16, True, 16), (4, True, 4)],
)
def test_a_workers_share_is_half_its_pool_or_all_of_a_webhook_worker(slots, webhooks_only, share):
    assert worker_share(pool_slots=slots, webhooks_only=webhooks_only) == share


def test_a_long_loop_hands_on_to_a_new_message(
    allow_private, receiver, published_jobs, monkeypatch
):
    from webhooks import slots

    # given two orgs' due deliveries, and a loop that may run for no time at all
    monkeypatch.setattr(slots, "LOOP_SECONDS", 0.0)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(slots, "publish_job", lambda **kw: sent.append(kw) or True)
    for _ in range(2):
        org = OrganizationFactory()
        register(make_caller(org), receiver.url)
        publish_to_one(org)
    first = messages_of(published_jobs)[0]
    # when one message runs
    ran = slots.attempts_run(job_id=uuid.UUID(first), worker="w", share=4)
    # then it made one attempt and left the next to a new message of the delivery task
    assert ran == 1
    assert [kw["task_name"] for kw in sent] == ["serenity.step.deliverWebhook"]
    assert len(receiver.received) == 1


def test_a_loop_runs_another_orgs_first_delivery_before_its_own_orgs_backlog(
    allow_private, receiver, published_jobs
):
    # given a worker that runs one attempt at a time, an org with three due deliveries and
    # then another org's one
    backlog, other = OrganizationFactory(), OrganizationFactory()
    register(make_caller(backlog), f"{receiver.url}/backlog")
    register(make_caller(other), f"{receiver.url}/other")
    for _ in range(3):
        publish_to_one(backlog)
    publish_to_one(other)
    first = messages_of(published_jobs)[0]
    # when the backlog's first message runs its loop
    from webhooks import slots

    ran = slots.attempts_run(job_id=uuid.UUID(first), worker="w", share=1)
    # then the other org's delivery goes first (the fewest due), not after the backlog
    assert ran == 4
    assert [r.path for r in receiver.received] == [
        "/hook/other",
        "/hook/backlog",
        "/hook/backlog",
        "/hook/backlog",
    ]


def test_a_message_that_finds_no_slot_leaves_its_job_to_the_running_loops(
    allow_private, receiver, published_jobs
):
    from webhooks import slots
    from webhooks.models import AttemptSlot

    # given a worker whose one slot is held (by an attempt in flight)
    org = OrganizationFactory()
    register(make_caller(org), receiver.url)
    job_id = publish_to_one(org)
    AttemptSlot.objects.create(
        kind="worker",
        holder="w",
        number=0,
        job_id=uuid.uuid4(),
        held_until=timezone.now() + timedelta(seconds=40),
    )
    # when its message comes
    ran = slots.attempts_run(job_id=job_id, worker="w", share=1)
    # then it attempts nothing, and the dispatcher publishes the job again only much later
    assert ran == 0 and receiver.arrivals == []
    job = AsyncJob.objects.get(pk=job_id)
    assert job.claim_token is None
    assert job.published_at > timezone.now() + timedelta(minutes=5)
