"""SPEC §11.1's upstream limits: the credential's queue served round-robin across the orgs that
wait on it and the concurrency limit (slots expiring on their own), once per store; slots shared
by every process, the pause after a 429 without Retry-After, one set of limits per credential."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis
import requests
from django.conf import settings

from provisioning.limiter import Adaptation, MemoryStore, RedisStore, Reservation
from provisioning.quota import (
    CredentialPermits,
    Limits,
    PermitDeferredError,
    credential_key,
    slot_ttl,
)
from provisioning.semrush import SemrushBusyError, semrush_client_for
from provisioning.simulator import SemrushSimulator
from provisioning.upstream import client_for_org
from tests.conftest import ROOT, TEST_BROKER_URL
from tests.factories import OrganizationFactory
from tests.provisioning.test_quota import FakeClock, _key, redis_keys, store_on

__all__ = ["redis_keys"]  # the fixture, shared with test_quota


@contextlib.contextmanager
def override_base_url(base_url: str):  # type: ignore[no-untyped-def]
    from django.test import override_settings

    with override_settings(SEMRUSH_BASE_URL=base_url):
        yield


# --- round-robin across the orgs waiting on one credential ------------------------------------


@pytest.fixture(params=["memory", "redis"])
def bucket_store(request, redis_keys):  # type: ignore[no-untyped-def]
    return store_on(request.param, FakeClock(), redis_keys)


def test_a_second_org_is_not_queued_behind_the_first_org_s_backlog(bucket_store, redis_keys):
    # given one credential at 1 permit/s (burst 1), drained, and org A's 100 steps refused:
    # A's queue reaches about 100 s ahead
    key = _key()
    redis_keys.append(key)
    assert bucket_store.reserve(key, rate=1.0, burst=1, max_wait=0.0, org="a").granted
    places_a = [
        bucket_store.reserve(key, rate=1.0, burst=1, max_wait=0.0, org="a").wait for _ in range(100)
    ]
    assert places_a[-1] == pytest.approx(100.0, abs=1.0)
    # when org B's first step is refused, then A's next one
    place_b = bucket_store.reserve(key, rate=1.0, burst=1, max_wait=0.0, org="b").wait
    next_a = bucket_store.reserve(key, rate=1.0, burst=1, max_wait=0.0, org="a").wait
    second_b = bucket_store.reserve(key, rate=1.0, burst=1, max_wait=0.0, org="b").wait
    # then B's place is the next free permit, not the end of A's backlog; while both wait,
    # each org's places are two intervals apart (round-robin)
    assert place_b == pytest.approx(1.0, abs=0.5)
    assert next_a == pytest.approx(101.0, abs=1.0)
    assert second_b - place_b == pytest.approx(2.0, abs=0.5)


@pytest.fixture(params=["memory", "redis"])
def clocked_store(request, redis_keys):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    return store_on(request.param, clock, redis_keys), clock


def test_a_second_org_s_first_permit_is_kept_for_it_ahead_of_the_backlog(clocked_store, redis_keys):
    # given one credential at 10 permits/s, drained, and org A's steps coming back faster than
    # they are served (its queue 10 s long)
    bucket_store, clock = clocked_store
    key = _key()
    redis_keys.append(key)
    for _ in range(100):
        bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.0, org="a", first=True)
    # when org B's first step is refused (the next permit is 0.1 s away), and one of A's asks
    place_b = bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.0, org="b", first=True)
    assert place_b == Reservation(False, pytest.approx(0.1))
    a_meanwhile = bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="a", first=True)
    # then B's permit was kept for it (SPEC §13.7): A's first permit would come after it, two
    # intervals away, which a queued org does not take (it keeps its place in its queue), and
    # when B's step is back at its place its permit is there
    assert a_meanwhile == Reservation(False, pytest.approx(10.0, abs=0.5))
    clock.now += place_b.wait
    assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="b", first=True) == (
        Reservation(True, 0.0)
    )
    # and a step of A already under way (not its first permit) is never held back for it
    assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=5.0, org="a").granted


def test_a_queued_org_takes_a_first_permit_only_when_it_is_the_next_free_one(
    clocked_store, redis_keys
):
    # given one credential at 10 permits/s, org A's steps refused into a queue 1.6 s long, and
    # a permit reserved ahead by one of A's steps under way: the next permit is 0.2 s away
    bucket_store, clock = clocked_store
    key = _key()
    redis_keys.append(key)
    assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.0, org="a", first=True).granted
    for _ in range(15):
        assert not bucket_store.reserve(
            key, rate=10.0, burst=1, max_wait=0.0, org="a", first=True
        ).granted
    assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=5.0, org="a") == (
        Reservation(True, pytest.approx(0.1))
    )
    # when a step of A and then one of B ask for their first permits, each patient for 0.25 s
    a_first = bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="a", first=True)
    b_first = bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="b", first=True)
    # then A's step is refused: two intervals away is deeper than a queued org's steps reserve
    # (its queue paces it; SPEC §13.7), and it takes its place at the end of its queue; B's
    # step, with no queue, gets the permit within its patience
    assert a_first == Reservation(False, pytest.approx(1.7, abs=0.15))
    assert b_first == Reservation(True, pytest.approx(0.2))
    # and once A's queue has passed, A's first permits are as patient as the caller again
    clock.now += 3.0
    for expected in (0.0, 0.1):
        assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=5.0, org="a") == (
            Reservation(True, pytest.approx(expected))
        )
    assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="a", first=True) == (
        Reservation(True, pytest.approx(0.2))
    )


def test_steps_under_way_reserving_ahead_do_not_push_a_second_org_s_first_permit_back(
    clocked_store, redis_keys
):
    # given org A's steps under way reserving permits ahead (up to 5 s each), and A's queue
    bucket_store, clock = clocked_store
    key = _key()
    redis_keys.append(key)
    for _ in range(5):
        assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=5.0, org="a").granted
    assert not bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.0, org="a").granted
    # when B's first step is refused (five permits reserved ahead), then A's steps under way
    # keep reserving while B's step is re-scheduled
    place_b = bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="b", first=True)
    assert place_b == Reservation(False, pytest.approx(0.5))
    for _ in range(20):
        assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=5.0, org="a").granted
    # then B's step, back at its place, gets its permit at once, not behind A's 20
    clock.now += place_b.wait
    assert bucket_store.reserve(key, rate=10.0, burst=1, max_wait=0.25, org="b", first=True) == (
        Reservation(True, 0.0)
    )


def test_an_org_alone_gets_places_one_interval_apart(bucket_store, redis_keys):
    key = _key()
    redis_keys.append(key)
    bucket_store.reserve(key, rate=2.0, burst=1, max_wait=0.0, org="a")
    places = [
        bucket_store.reserve(key, rate=2.0, burst=1, max_wait=0.0, org="a").wait for _ in range(3)
    ]
    assert [round(b - a, 2) for a, b in itertools.pairwise(places)] == [0.5, 0.5]


# --- slots: the concurrency limit --------------------------------------------------------------


@pytest.fixture(params=["memory", "redis"])
def slot_store(request, redis_keys):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    return store_on(request.param, clock, redis_keys), clock


def test_slots_up_to_the_limit_then_none_until_one_is_given_back(slot_store, redis_keys):
    store, _clock = slot_store
    key = _key()
    redis_keys.append(key)
    # when three slots are asked for with a limit of two
    taken = [store.take(key, limit=2, ttl=60.0) for _ in range(3)]
    # then two are held and the third is refused
    assert taken[0] is not None and taken[1] is not None and taken[2] is None
    assert store.held(key) == 2
    # and once one is given back, the next is granted
    store.give_back(key, taken[0])
    assert store.take(key, limit=2, ttl=60.0) is not None
    assert store.held(key) == 2


def test_a_slot_expires_on_its_own(slot_store, redis_keys):
    store, clock = slot_store
    key = _key()
    redis_keys.append(key)
    # given the one slot held by a call whose process died (never given back)
    assert store.take(key, limit=1, ttl=5.0) is not None
    assert store.take(key, limit=1, ttl=5.0) is None
    # when its time runs out
    clock.now += 5.01
    # then it is free again
    assert store.held(key) == 0
    assert store.take(key, limit=1, ttl=5.0) is not None


_HOLD_AND_DIE = """
import sys, time
import django
django.setup()
from provisioning.limiter import RedisStore
store = RedisStore(sys.argv[1], timeout=2.0)
assert store.take(sys.argv[2], limit=1, ttl=float(sys.argv[3])) is not None
print("held", flush=True)
time.sleep(60)
"""


def test_a_killed_process_s_slot_comes_back(redis_keys):
    # given a process holding the credential's only slot (limit 1, expiring after 1.5 s)
    key = _key()
    redis_keys.append(key)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD_AND_DIE, TEST_BROKER_URL, key, "1.5"],
        cwd=str(ROOT),
        stdout=subprocess.PIPE,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings_test"},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"held"
    store = RedisStore(TEST_BROKER_URL, timeout=2.0)
    assert store.take(key, limit=1, ttl=5.0) is None
    # when it is killed in the middle of its call (it never gives the slot back)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # then the slot is refused until it expires, then granted
    assert store.take(key, limit=1, ttl=5.0) is None
    deadline = time.monotonic() + 5
    taken = None
    while taken is None and time.monotonic() < deadline:
        time.sleep(0.1)
        taken = store.take(key, limit=1, ttl=5.0)
    assert taken is not None


def test_the_slot_lives_longer_than_any_one_call(settings):
    settings.SEMRUSH_TIMEOUT_SECONDS = 15
    assert slot_ttl() == 20.0


# --- two real processes never exceed the limit together ---------------------------------------

_CALLS = """
import sys, threading
import django
django.setup()
from provisioning.quota import CredentialPermits, Limits, credential_key
from provisioning.semrush import semrush_client_for
base_url, token, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
statuses = []

def call_three() -> None:
    for _ in range(3):
        permits = CredentialPermits(
            key=credential_key(token),
            limits=Limits(rate=1000.0, burst=1000, concurrency=limit),
            org_id="org-" + sys.argv[4],
            in_step=False,
        )
        client = semrush_client_for(token=token, permits=permits)
        client.list_languages()
        statuses.append(200)

threads = [threading.Thread(target=call_three) for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(statuses))
"""


def _in_flight_peak(log: list[dict[str, Any]]) -> int:
    """The most calls in flight at once, from the simulator's log (arrival + duration)."""
    events: list[tuple[datetime, int]] = []
    for entry in log:
        start = datetime.fromisoformat(entry["at"])
        events.append((start, 1))
        events.append((start + timedelta(milliseconds=entry["durationMs"]), -1))
    peak = current = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):
        current += delta
        peak = max(peak, current)
    return peak


def test_two_processes_never_exceed_the_concurrency_limit_together(transactional_db):
    # given a simulator that refuses a fourth call in flight per token, 150 ms per call
    sim = SemrushSimulator(port=0, token="limit-token", parents=[]).start()
    try:
        sim.configure({"latencyMs": 150, "concurrencyLimit": 3})
        env = {
            **os.environ,
            "CELERY_BROKER_URL": TEST_BROKER_URL,
            "SEMRUSH_BASE_URL": sim.base_url,
            "SECRET_KEY": settings.SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": "config.settings_test",
            "SERENITY_TEST_SETTINGS": json.dumps({"SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS": 30}),
        }
        # when two processes of six threads each make 18 calls each on the one credential,
        # with a concurrency limit of 3
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CALLS, sim.base_url, "limit-token", "3", str(n)],
                env=env,
                cwd=str(ROOT),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for n in range(2)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()[-3000:]
            assert out.decode().strip().splitlines()[-1] == "18"
        log = requests.get(f"{sim.base_url}/__sim/requests", timeout=5).json()
    finally:
        sim.stop()
        redis.Redis.from_url(TEST_BROKER_URL).delete(credential_key("limit-token"))
    # then upstream never refused one (no 429), and never more than 3 were in flight at once
    assert [entry["status"] for entry in log] == [200] * 36
    assert _in_flight_peak(log) <= 3


# --- the patience of each caller for a slot ----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _full(limit: int) -> tuple[MemoryStore, str, list[str]]:
    store = MemoryStore()
    key = _key()
    held = [store.take(key, limit=limit, ttl=60.0) for _ in range(limit)]
    assert None not in held
    return store, key, [slot for slot in held if slot is not None]


def _slot_permits(store: MemoryStore, key: str, clock: Clock, *, in_step: bool) -> Any:
    return CredentialPermits(
        key=key,
        limits=Limits(rate=0.0, burst=1, concurrency=2),
        org_id="org-1",
        in_step=in_step,
        store=store,
        sleep=clock.sleep,
        clock=clock,
    )


def test_a_step_with_no_slot_handed_over_in_time_comes_back_at_its_turn(monkeypatch):
    # given both slots held, the slots learnt to be held 2 s each
    monkeypatch.setattr("provisioning.quota.STEP_SLOT_WAIT_SECONDS", 0.05)
    clock = FakeClock()
    store = MemoryStore(clock)
    key = _key()
    first = store.take(key, limit=2, ttl=60.0)
    clock.now += 2.0
    store.give_back(key, first, ttl=60.0)  # type: ignore[arg-type]
    for _ in range(2):
        assert store.take(key, limit=2, ttl=60.0) is not None
    # when a step waits for a slot and none is given back
    with pytest.raises(PermitDeferredError) as deferred:
        _slot_permits(store, key, Clock(), in_step=True).acquire("create_project")
    # then it is re-scheduled for its turn (one slot's hold over two slots), not a fixed
    # back-off, and it waits no more
    assert deferred.value.retry_in == pytest.approx(1.0)
    assert store.apply(key, lambda state, now: (state.waiters, state), None) == {}


def test_a_sync_request_waits_for_a_slot_within_its_budget_then_is_busy(settings):
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 0.1
    store, key, _ = _full(2)
    with pytest.raises(SemrushBusyError) as busy:
        _slot_permits(store, key, Clock(), in_step=False).acquire("create_project")
    assert busy.value.retry_after == 1


@pytest.mark.parametrize("store_name", ["memory", "redis"])
def test_a_step_refused_a_slot_gets_one_when_a_call_ends_without_a_re_schedule(
    store_name, redis_keys, monkeypatch
):
    # given both slots of the credential held by calls in flight
    store = store_on(store_name, FakeClock(), redis_keys) if store_name == "memory" else None
    store = store or RedisStore(TEST_BROKER_URL, timeout=1.0)
    key = _key()
    redis_keys.append(key)
    held = [store.take(key, limit=2, ttl=60.0) for _ in range(2)]
    permits = _slot_permits(store, key, Clock(), in_step=True)
    # when a step asks for one, and a call ends a moment later
    ended = threading.Timer(0.2, lambda: store.give_back(key, held[0], ttl=60.0))
    ended.start()
    try:
        permits.acquire("create_project")  # no PermitDeferredError
    finally:
        ended.cancel()
    # then the step holds the slot the call gave back (still two in flight), and gives it back
    # once its own call has its answer
    assert store.held(key) == 2
    permits.release()
    assert store.held(key) == 1


@pytest.mark.parametrize("store_name", ["memory", "redis"])
def test_a_slot_given_back_goes_to_the_waiting_org_holding_the_fewest(store_name, redis_keys):
    # given two slots, both held by org A (its onboarding), and two waiters: A's, then B's
    store = store_on(store_name, FakeClock(), redis_keys)
    key = _key()
    slots = [store.take(key, limit=2, ttl=60.0, org="A") for _ in range(2)]
    assert store.take(key, limit=2, ttl=60.0, org="A", waiter="a", patience=5.0) is None
    assert store.take(key, limit=2, ttl=60.0, org="B", waiter="b", patience=5.0) is None
    # when one of A's calls ends (A then holds one slot, B none)
    store.give_back(key, slots[0], ttl=60.0)
    # then B's waiter gets it, though A's waited longer; A's waits on
    assert store.handed(key, "a", 0.0) is None
    assert store.handed(key, "b", 0.0) is not None
    # and when A's other call ends, A's waiter gets that slot
    store.give_back(key, slots[1], ttl=60.0)
    assert store.handed(key, "a", 0.0) is not None
    assert store.held(key) == 2


# --- a 429 without Retry-After, and one set of limits per credential --------------------------


class PauseRecorder:
    def __init__(self) -> None:
        self.paused: list[float] = []

    def pause(self, key: str, *, seconds: float | None, **_: Any) -> None:
        self.paused.append(seconds)  # type: ignore[arg-type]


def test_a_429_without_retry_after_lowers_the_rate_and_one_with_it_pauses():
    recorder = PauseRecorder()
    permits = CredentialPermits(
        key="k",
        limits=Limits(10.0, 20),
        org_id="o",
        store=recorder,  # type: ignore[arg-type]
    )
    permits.pause(None)
    permits.pause(3.0)
    assert recorder.paused == [None, 3.0]


def test_a_429_without_retry_after_from_upstream_lowers_the_rate_for_every_caller(
    redis_keys, settings
):
    settings.SEMRUSH_RATE_DECREASE_FACTOR = 0.85
    # given a simulator whose 429s carry no Retry-After, and a scripted 429
    sim = SemrushSimulator(port=0, token="pause-token", parents=[]).start()
    key = credential_key("pause-token")
    redis_keys.append(key)
    try:
        sim.configure({"retryAfterSeconds": None})
        sim.add_fault({"pathRegex": "/languages$", "status": 429})
        permits = CredentialPermits(
            key=key,
            limits=Limits(rate=4.0, burst=1),
            org_id="o",
            in_step=False,
            store=RedisStore(TEST_BROKER_URL, timeout=2.0),
        )
        # when a call meets it
        with override_base_url(sim.base_url):
            semrush_client_for(token="pause-token", permits=permits).list_languages()
        log = sim.requests_log()
    finally:
        sim.stop()
    # then the retry passed, and every process now paces the credential at the lowered rate
    # (the factor, 0.85 x 4/s), the retry one lowered interval after the 429 at least
    assert [entry["status"] for entry in log] == [429, 200]
    other = RedisStore(TEST_BROKER_URL, timeout=2.0)
    assert other.rate(key, ceiling=4.0, adapt=Adaptation(spell=3600.0)) == pytest.approx(3.4)
    gap = datetime.fromisoformat(log[1]["at"]) - datetime.fromisoformat(log[0]["at"])
    assert gap >= timedelta(seconds=0.25)


def test_orgs_on_the_service_credential_share_its_limits_whatever_their_override(db, settings):
    settings.SEMRUSH_RATE_LIMIT_PER_SECOND = 10
    settings.SEMRUSH_RATE_LIMIT_BURST = 20
    settings.SEMRUSH_CONCURRENCY_LIMIT = 10
    shared = OrganizationFactory(
        semrush_rate_limit_per_second=50, semrush_rate_limit_burst=5, semrush_concurrency_limit=3
    )
    own = OrganizationFactory(
        semrush_rate_limit_per_second=50, semrush_rate_limit_burst=5, semrush_concurrency_limit=3
    )
    own.set_semrush_credential("own-token")
    own.save()
    shared_permits = client_for_org(shared).permits
    own_permits = client_for_org(own).permits
    assert isinstance(shared_permits, CredentialPermits)
    assert isinstance(own_permits, CredentialPermits)
    assert shared_permits.limits == Limits(rate=9.8, burst=20, concurrency=10)
    assert own_permits.limits == Limits(rate=49.0, burst=5, concurrency=3)
    assert shared_permits.key == credential_key(settings.SEMRUSH_API_TOKEN)
    assert own_permits.key == credential_key("own-token")
