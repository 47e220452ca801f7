"""The upstream limiter and permits (SPEC §10.6, §12.3): the limiter's rules once per store (in
this process for the embedded default, Redis for production), one bucket shared across
processes, and the patience of each caller."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import redis
from django.conf import settings

from provisioning import limiter
from provisioning.limiter import Adaptation, MemoryStore, RedisStore, Reservation
from provisioning.quota import (
    STEP_QUEUE,
    STEP_WAIT_SECONDS,
    CredentialPermits,
    Limits,
    PermitDeferredError,
    credential_key,
)
from provisioning.quota import limits_for as quota_limits
from provisioning.semrush import SemrushBusyError
from tests.conftest import ROOT, TEST_BROKER_URL


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _key() -> str:
    return credential_key(f"token-{uuid.uuid4()}")


# --- the rules, once per store, on a clock the test drives --------------------------------------


@pytest.fixture
def redis_keys():  # type: ignore[no-untyped-def]
    keys: list[str] = []
    yield keys
    if keys:
        redis.Redis.from_url(TEST_BROKER_URL).delete(*keys)


def store_on(name: str, clock: FakeClock, redis_keys: list[str]) -> Any:
    """The store `name` on `clock`; its keys (from `_key`) are deleted after the test."""
    if name == "memory":
        return MemoryStore(clock)
    store = RedisStore(TEST_BROKER_URL, timeout=2.0, clock=clock)
    real_apply = store.apply

    def apply(key: str, change: Any, fallback: Any) -> Any:
        redis_keys.append(key)
        return real_apply(key, change, fallback)

    store.apply = apply  # type: ignore[method-assign]
    return store


@pytest.fixture(params=["memory", "redis"])
def clocked(request, redis_keys):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    return store_on(request.param, clock, redis_keys), clock


def test_an_idle_credential_s_burst_goes_at_once_then_the_pace_resumes_after_it(clocked):
    store, _clock = clocked
    key = _key()
    # given rate 10/s (interval 0.1 s) and burst 3, nothing granted lately
    # when 5 permits are asked for at the same instant, each ready to wait up to 1 s
    answers = [store.reserve(key, rate=10.0, burst=3, max_wait=1.0) for _ in range(5)]
    # then the burst goes at once, and the pace resumes one interval after it (the burst is
    # not a debt the next callers pay): a busy credential gets no second burst
    assert [a.granted for a in answers] == [True] * 5
    assert [round(a.wait, 6) for a in answers] == [0.0, 0.0, 0.0, 0.1, 0.2]


@pytest.mark.parametrize(
    ("rate", "burst", "waits"),
    [
        pytest.param(10.0, 20, [0.0] * 10 + [1.0, 1.1], id="ten at 10/s"),
        pytest.param(2.0, 3, [0.0, 0.0, 1.0, 1.5], id="two at 2/s"),
        # the pace after the burst, one pause as the window fills, the pace again (no waves)
        pytest.param(
            10.0,
            5,
            [0.0] * 5 + [0.1, 0.2, 0.3, 0.4, 0.5, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5],
            id="a backlog after a burst",
        ),
    ],
)
def test_no_more_permits_than_the_rate_fall_within_a_second_whatever_the_burst(
    clocked, rate, burst, waits
):
    store, _clock = clocked
    key = _key()
    # when permits are asked for at once with a burst above the rate
    answers = [store.reserve(key, rate=rate, burst=burst, max_wait=5.0) for _ in waits]
    # then as many go at once as upstream counts in a second, the next a second later, and the
    # pace follows
    assert [round(a.wait, 6) for a in answers] == waits


def test_at_a_high_rate_the_state_keeps_a_bounded_number_of_permit_times():
    from provisioning.limiter_rules import WINDOW_PERMITS_MAX, State, reserve

    # given the rate out of the way (100,000/s)
    state = State()
    # when 300 permits are reserved
    for _ in range(300):
        _answer, state = reserve(state, 1000.0, rate=100_000.0, burst=10, max_wait=5.0)
    # then the state keeps the times of the last 50 only (it is encoded on every change)
    assert len(state.recent) == WINDOW_PERMITS_MAX == 50


def test_the_bucket_refills_with_time(clocked):
    store, clock = clocked
    key = _key()
    for _ in range(2):
        store.reserve(key, rate=10.0, burst=2, max_wait=0.0)
    assert store.reserve(key, rate=10.0, burst=2, max_wait=0.0).granted is False
    # when a second passes
    clock.now += 1.0
    # then the burst is back
    assert [store.reserve(key, rate=10.0, burst=2, max_wait=0.0).granted for _ in range(3)] == [
        True,
        True,
        False,
    ]


def test_a_pause_holds_every_permit_until_it_ends(clocked):
    store, _clock = clocked
    key = _key()
    # given an idle bucket with a burst of 5
    # when upstream answered 429 with Retry-After 30
    store.pause(key, rate=10.0, burst=5, seconds=30.0)
    # then the next permit is due when the pause ends, and no burst follows it (a Retry-After
    # is obeyed; the rate itself stays where it was)
    first = store.reserve(key, rate=10.0, burst=5, max_wait=60.0)
    assert first.granted is True and first.wait == pytest.approx(30.0)
    second = store.reserve(key, rate=10.0, burst=5, max_wait=60.0)
    assert second.granted is True and second.wait == pytest.approx(30.1)
    assert store.rate(key, ceiling=10.0) == 10.0
    # and an impatient caller is told to come back then
    refused = store.reserve(key, rate=10.0, burst=5, max_wait=1.0)
    assert refused.granted is False and refused.wait >= 30.0


def test_the_redis_state_is_one_expiring_key_named_by_a_hash(redis_keys):
    # given
    token = f"secret-token-{uuid.uuid4()}"
    key = credential_key(token)
    redis_keys.append(key)
    store = RedisStore(TEST_BROKER_URL, timeout=2.0)
    # when
    store.reserve(key, rate=1.0, burst=1, max_wait=0.0)
    # then one key, whose name says nothing of the credential, that expires once idle
    client = redis.Redis.from_url(TEST_BROKER_URL)
    assert key.startswith("serenity:quota:") and token not in key and len(key) <= 64
    assert json.loads(client.get(key))["tat"] > 0
    assert 0 < client.pttl(key) <= 62_000


def test_a_redis_state_written_by_another_release_is_read_without_its_unknown_fields(redis_keys):
    # given a credential's state with a field this release does not know (an older release's
    # moving average), its next permit due in 2 s
    key = _key()
    redis_keys.append(key)
    client = redis.Redis.from_url(TEST_BROKER_URL)
    server_now = float(client.time()[0]) + client.time()[1] / 1e6
    client.set(key, json.dumps({"tat": server_now + 2.0, "lanes": {"org": 1.0}}), px=60_000)
    # when a caller with no patience asks
    answer = RedisStore(TEST_BROKER_URL, timeout=2.0).reserve(key, rate=1.0, burst=1, max_wait=0.0)
    # then the state was read (its permit is not due yet), not failed open
    assert answer.granted is False and answer.wait == pytest.approx(2.0, abs=0.2)


def test_a_free_slot_comes_with_its_permit_and_a_refused_permit_holds_no_slot(clocked):
    store, _clock = clocked
    key = _key()
    asked = {"limit": 2, "ttl": 5.0, "org": "o", "patience": 0.0, "rate": 1.0, "burst": 1}
    # given a credential with 2 slots at 1 permit/s, burst 1
    # when a call asks for a slot and its permit at once
    slot, answer = store.take_and_reserve(
        key,
        waiter="w1",
        max_wait=0.0,
        first=False,
        **asked,  # type: ignore[arg-type]
    )
    # then it holds a slot and its permit is due now
    assert slot is not None and answer == Reservation(True, 0.0)
    assert store.held(key) == 1
    # when the next call has no patience for the next permit (due in 1 s)
    slot, answer = store.take_and_reserve(
        key,
        waiter="w2",
        max_wait=0.0,
        first=False,
        **asked,  # type: ignore[arg-type]
    )
    # then it is refused its permit, given its place, and holds no slot
    assert slot is None and answer == Reservation(False, 1.0)
    assert store.held(key) == 1
    # and with both slots held, a call gets neither (it may wait for a slot: no permit asked)
    assert store.take(key, limit=2, ttl=5.0) is not None
    slot, answer = store.take_and_reserve(
        key,
        waiter="w3",
        max_wait=5.0,
        first=False,
        **asked,  # type: ignore[arg-type]
    )
    assert (slot, answer) == (None, None)
    assert store.held(key) == 2


def test_redis_unreachable_lets_calls_through():
    # given a Redis that does not answer
    store = RedisStore("redis://127.0.0.1:1/0", timeout=0.5)
    key = _key()
    # when / then: the limiter fails open (upstream's 429 is the backstop)
    assert store.reserve(key, rate=1.0, burst=1, max_wait=0.0) == Reservation(True, 0.0)
    assert store.take(key, limit=1, ttl=5.0) is not None
    assert store.pause_remaining(key) == 0.0


def test_threads_waiting_behind_an_unreachable_redis_do_not_each_try_it_again():
    # given a Redis whose every read takes 0.2 s to fail (a timeout), and the reads counted
    store = RedisStore("redis://127.0.0.1:1/0", timeout=0.5)
    key = _key()
    reads: list[str] = []

    def timing_out(read_key: str) -> Any:
        reads.append(read_key)
        time.sleep(0.2)
        raise redis.TimeoutError("timed out")

    store._read = timing_out  # type: ignore[method-assign]
    # when 8 threads of the process ask for a permit at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(
            pool.map(lambda _: store.reserve(key, rate=1.0, burst=1, max_wait=0.0), range(8))
        )
    # then one of them found Redis unreachable; those queued behind it went through at once
    # (fail open) instead of waiting out a timeout each, one after another
    assert answers == [Reservation(True, 0.0)] * 8
    assert reads == [key]


# --- one bucket across real processes ----------------------------------------------------------

_GRAB = """
import json, sys, time
import django
django.setup()
from provisioning.quota import credential_key, store
key = credential_key(sys.argv[1])
due = []
for _ in range(4):
    answer = store().reserve(key, rate=2.0, burst=1, max_wait=60.0)
    due.append(time.time() + answer.wait)
print(json.dumps(due))
"""


def test_two_processes_share_one_bucket_per_credential():
    # given two real processes taking permits for one credential at rate 2/s, burst 1
    token = f"shared-{uuid.uuid4()}"
    env = {
        **__import__("os").environ,
        "CELERY_BROKER_URL": TEST_BROKER_URL,
        "SECRET_KEY": settings.SECRET_KEY,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "SERENITY_TEST_SETTINGS": json.dumps({"SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS": 60}),
    }
    # when each reserves four permits at the same time (the answer says when each is due)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _GRAB, token],
            env=env,
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outputs: list[Any] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        outputs.extend(json.loads(out.decode().strip().splitlines()[-1]))
    # then the eight permits are due one interval (0.5 s) apart, whichever process took them:
    # with a bucket per process, pairs would be due together
    due = sorted(outputs)
    gaps = [b - a for a, b in itertools.pairwise(due)]
    assert len(due) == 8
    assert min(gaps) > 0.4, gaps
    redis.Redis.from_url(TEST_BROKER_URL).delete(credential_key(token))


def test_threads_of_one_process_change_a_credential_s_state_without_conflicts(redis_keys):
    # given one Redis store shared by 16 threads of a process (a `-P threads` worker), and
    # every compare-and-set it sends counted with whether it was written
    store = RedisStore(TEST_BROKER_URL, timeout=2.0)
    key = _key()
    redis_keys.append(key)
    sent: list[int] = []
    compare_and_set = store._compare_and_set

    def counted(**kwargs: Any) -> Any:
        reply = compare_and_set(**kwargs)
        sent.append(int(reply == 1))
        return reply

    store._compare_and_set = counted  # type: ignore[method-assign]

    def take(_: int) -> None:
        for _ in range(25):
            assert store.reserve(key, rate=100_000.0, burst=1, max_wait=60.0).granted

    # when they reserve 400 permits at once
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(take, range(16)))
    # then each permit's change was written by its first compare-and-set: none re-read and
    # re-applied after another thread's write
    assert len(sent) == 400
    assert sum(sent) == 400


# --- permits: who waits, and how long ----------------------------------------------------------


class ScriptedStore:
    """A bucket that answers from a script and records what it was asked."""

    def __init__(self, *answers: Reservation) -> None:
        self.answers = list(answers)
        self.asked: list[float] = []
        self.paused: list[float] = []

    def reserve(
        self,
        key: str,
        *,
        rate: float,
        burst: int,
        max_wait: float,
        first: bool = False,
        org: str = "",
        **_: Any,
    ) -> Reservation:
        self.asked.append(max_wait)
        answer = self.answers.pop(0)
        if answer.granted or answer.wait <= max_wait:
            return Reservation(True, answer.wait)
        return answer

    def pause(self, key: str, *, seconds: float | None, **_: Any) -> None:
        self.paused.append(seconds)  # type: ignore[arg-type]

    def pause_remaining(self, key: str) -> float:
        return 0.0


def _permits(store: ScriptedStore, *, in_step: bool, sleeps: list[float]) -> CredentialPermits:
    return CredentialPermits(
        key="k",
        limits=Limits(rate=10.0, burst=20),
        org_id="org-1",
        in_step=in_step,
        store=store,  # type: ignore[arg-type]
        sleep=sleeps.append,
    )


def test_a_sync_request_waits_at_most_five_seconds_in_all_then_is_busy(settings):
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 5.0
    store = ScriptedStore(Reservation(False, 3.0), Reservation(False, 2.5), Reservation(False, 1))
    sleeps: list[float] = []
    permits = _permits(store, in_step=False, sleeps=sleeps)
    # when the first permit is 3 s away, then the second 2.5 s
    permits.acquire("list_family")
    with pytest.raises(SemrushBusyError) as raised:
        permits.acquire("create_subworkspace")
    # then the request waited 3 s, was offered at most the 2 s left, and is told 3 s
    assert sleeps == [3.0]
    assert store.asked == [5.0, 2.0]
    assert raised.value.retry_after == 3 and raised.value.status is None
    # and its compensation may wait longer (an orphan is worse than a slower 503)
    permits.acquire("delete_project")
    assert store.asked[-1] == 20.0


def test_a_step_takes_its_first_permit_only_if_it_is_due_soon_else_is_deferred():
    # given a step whose first permit is 4.2 s away (rate 10/s: STEP_QUEUE permits are 0.3 s)
    store = ScriptedStore(Reservation(False, 4.2))
    sleeps: list[float] = []
    permits = _permits(store, in_step=True, sleeps=sleeps)
    # when it asks
    with pytest.raises(PermitDeferredError) as raised:
        permits.acquire("list_family")
    # then it was offered a quarter of a second at most, slept not at all, and is re-scheduled
    # at its place: its worker slot is free at once
    assert raised.value.retry_in == 4.2
    assert store.asked == [min(STEP_WAIT_SECONDS, STEP_QUEUE / 10.0)] == [0.25]
    assert sleeps == []


def test_a_step_that_has_started_waits_up_to_the_sync_wait(settings):
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 5.0
    store = ScriptedStore(Reservation(True, 0.0), Reservation(False, 3.0), Reservation(False, 9))
    sleeps: list[float] = []
    permits = _permits(store, in_step=True, sleeps=sleeps)
    permits.acquire("create_project")
    permits.acquire("set_tracked_url")
    with pytest.raises(PermitDeferredError):
        permits.acquire("publish_project")
    assert store.asked == [0.25, 5.0, 5.0]
    assert sleeps == [3.0]


def test_a_rate_of_zero_turns_the_limiter_off():
    store = ScriptedStore()
    permits = CredentialPermits(
        key="k",
        limits=Limits(rate=0.0, burst=1),
        org_id="o",
        in_step=False,
        store=store,  # type: ignore[arg-type]
    )
    permits.acquire("list_family")
    assert store.asked == []


def test_at_a_high_rate_a_step_waits_behind_at_most_three_reserved_permits():
    # given rate 50/s: three permits are 0.06 s
    store = ScriptedStore(Reservation(False, 0.2))
    permits = CredentialPermits(
        key="k",
        limits=Limits(rate=50.0, burst=1),
        org_id="o",
        in_step=True,
        store=store,  # type: ignore[arg-type]
    )
    # when its first permit is 0.2 s away
    with pytest.raises(PermitDeferredError):
        permits.acquire("list_family")
    # then it was offered 0.06 s, not a quarter of a second: it leaves the slot to another step
    assert store.asked == [pytest.approx(0.06)]


def test_the_org_override_and_the_margin(settings):
    settings.SEMRUSH_RATE_LIMIT_PER_SECOND = 10
    settings.SEMRUSH_RATE_LIMIT_BURST = 20
    settings.SEMRUSH_CONCURRENCY_LIMIT = 10
    assert quota_limits(rate=None, burst=None) == Limits(rate=9.8, burst=20, concurrency=10)
    assert quota_limits(rate=50.0, burst=1, concurrency=3) == Limits(
        rate=49.0, burst=1, concurrency=3
    )
    # an operator whose upstream is far away widens the margin
    settings.SEMRUSH_RATE_LIMIT_MARGIN = 0.05
    assert quota_limits(rate=None, burst=None) == Limits(rate=9.5, burst=20, concurrency=10)


def test_an_operator_command_waits_for_each_permit_without_a_total_budget(settings):
    from provisioning.quota import patient_permits

    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 5.0
    store = ScriptedStore(*[Reservation(False, 4.0)] * 3)
    sleeps: list[float] = []
    with patient_permits():
        permits = CredentialPermits(
            key="k",
            limits=Limits(10.0, 20),
            org_id="o",
            store=store,  # type: ignore[arg-type]
            sleep=sleeps.append,
        )
    for _ in range(3):
        permits.acquire("list_projects")
    assert sleeps == [4.0, 4.0, 4.0]
    assert store.asked == [20.0, 20.0, 20.0]


def test_a_permit_granted_before_a_pause_is_not_sent_into_it(settings):
    # given a permit due in 0.5 s, and while its holder sleeps, another process meets a 429
    # (Retry-After 3 s)
    settings.SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 10.0
    clock = FakeClock()
    store = MemoryStore(clock)
    key = _key()
    store.reserve(key, rate=2.0, burst=1, max_wait=0.0)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            store.pause(key, rate=2.0, burst=1, seconds=3.0)
        clock.now += seconds

    permits = CredentialPermits(
        key=key, limits=Limits(2.0, 1), org_id="o", in_step=False, store=store, sleep=sleep
    )
    # when it wakes
    permits.acquire("list_family")
    # then it asked again and went when the pause was over, not before
    assert sleeps == [0.5, pytest.approx(2.5)]
    assert clock.now == pytest.approx(1_000_003.0)
    assert store.pause_remaining(key) <= 0


# --- the adaptive rate (SPEC §13.3), once per store ----------------------------------------

RULES = Adaptation(decrease=0.5, step=1.0, spell=5.0, floor=0.5, hold=0.0)


def _throttle(store: Any, key: str, *, ceiling: float = 10.0) -> None:
    """A 429 without Retry-After."""
    store.pause(key, rate=ceiling, burst=1, seconds=None, adapt=RULES)


def test_a_429_without_retry_after_lowers_the_rate_once_a_second(clocked):
    store, clock = clocked
    key = _key()
    # given a credential at its ceiling of 10/s
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 10.0
    # when upstream answers 429 without Retry-After three times at once
    for _ in range(3):
        _throttle(store, key)
    # then the rate is halved once, not three times
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 5.0
    # and permits now come one new interval apart, the first one interval away (no burst)
    first = store.reserve(key, rate=10.0, burst=1, max_wait=5.0, adapt=RULES)
    second = store.reserve(key, rate=10.0, burst=1, max_wait=5.0, adapt=RULES)
    assert first.wait == pytest.approx(0.2)
    assert second.wait - first.wait == pytest.approx(0.2)
    # and a second later, another 429 halves it again
    clock.now += 1.0
    _throttle(store, key)
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 2.5


def test_the_rate_never_goes_below_the_floor(clocked):
    store, clock = clocked
    key = _key()
    for _ in range(10):
        _throttle(store, key)
        clock.now += 1.0
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 0.5
    # (a ceiling below the floor stays the ceiling)
    low = _key()
    _throttle(store, low, ceiling=0.3)
    assert store.rate(low, ceiling=0.3, adapt=RULES) == pytest.approx(0.3)


def test_a_quiet_spell_raises_the_rate_by_a_step_up_to_the_ceiling(clocked):
    store, clock = clocked
    key = _key()
    # given the rate lowered to 5/s
    _throttle(store, key)
    # when less than a spell passes without a 429, nothing changes
    clock.now += 4.9
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 5.0
    # then each whole spell adds a step
    clock.now += 0.1
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 6.0
    clock.now += 10.0
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 8.0
    # and never beyond the ceiling
    clock.now += 60.0
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 10.0
    reserved = [store.reserve(key, rate=10.0, burst=1, max_wait=5.0, adapt=RULES) for _ in range(3)]
    assert reserved[2].wait - reserved[1].wait == pytest.approx(0.1)


def test_a_429_restarts_the_quiet_spell(clocked):
    store, clock = clocked
    key = _key()
    _throttle(store, key)  # 5/s
    clock.now += 7.0  # one spell: 6/s
    # when a 429 with a Retry-After comes (obeyed, the rate not lowered) ...
    store.pause(key, rate=10.0, burst=1, seconds=1.0, adapt=RULES)
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 6.0
    # ... the next step is a whole spell after it, not after the last raise
    clock.now += 4.0
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 6.0
    clock.now += 1.0
    assert store.rate(key, ceiling=10.0, adapt=RULES) == 7.0


def test_the_climb_holds_a_step_below_the_rate_that_met_the_last_429(clocked):
    store, clock = clocked
    key = _key()
    rules = Adaptation(decrease=0.5, step=1.0, spell=5.0, floor=0.5, hold=30.0)
    # given the rate lowered from its ceiling of 10/s to 5/s by a 429 without Retry-After
    store.pause(key, rate=10.0, burst=1, seconds=None, adapt=rules)
    assert store.rate(key, ceiling=10.0, adapt=rules) == 5.0
    # when quiet spells pass, it climbs a step a spell to one step below 10/s (9/s at 20 s)
    clock.now += 20.0
    assert store.rate(key, ceiling=10.0, adapt=rules) == 9.0
    # then it holds there for the hold, though spells pass
    clock.now += 29.9
    assert store.rate(key, ceiling=10.0, adapt=rules) == 9.0
    # and only then probes above it, a step a spell, up to the ceiling
    clock.now += 5.1
    assert store.rate(key, ceiling=10.0, adapt=rules) == 10.0
    clock.now += 60.0
    assert store.rate(key, ceiling=10.0, adapt=rules) == 10.0
    # when a 429 meets it at 9/s (a share that shrank), the next hold is one step below that
    store.pause(key, rate=10.0, burst=1, seconds=None, adapt=rules)
    assert store.rate(key, ceiling=10.0, adapt=rules) == 5.0
    clock.now += 1.0
    store.pause(key, rate=10.0, burst=1, seconds=None, adapt=rules)  # a second later: 2.5/s
    assert store.rate(key, ceiling=10.0, adapt=rules) == 2.5
    clock.now += 35.0
    assert store.rate(key, ceiling=10.0, adapt=rules) == 4.0  # 5/s met it: held at 4/s
    clock.now += 10.0  # the hold (30 s) ended at 40 s, a spell after it
    assert store.rate(key, ceiling=10.0, adapt=rules) == 5.0


def test_the_adapted_rate_is_shared_by_every_client_of_the_store(clocked, settings):
    settings.SEMRUSH_RATE_DECREASE_FACTOR = 0.85
    store, _clock = clocked
    key = _key()
    # given a step's permits meeting a 429 without Retry-After
    permits = CredentialPermits(
        key=key, limits=Limits(10.0, 1), org_id="o", in_step=False, store=store
    )
    permits.pause(None)
    # then another client of the same credential is paced at the lowered rate (0.85 x 10)
    assert store.rate(key, ceiling=10.0) == pytest.approx(8.5)


def _round_trips(store: RedisStore) -> dict[str, int]:
    """Counts of `store`'s reads and compare-and-sets from now on."""
    counts = {"reads": 0, "compare_and_sets": 0}
    read, compare_and_set = store._read, store._compare_and_set

    def counted_read(key: str) -> Any:
        counts["reads"] += 1
        return read(key)

    def counted_compare_and_set(**kwargs: Any) -> Any:
        counts["compare_and_sets"] += 1
        return compare_and_set(**kwargs)

    store._read = counted_read  # type: ignore[method-assign]
    store._compare_and_set = counted_compare_and_set  # type: ignore[method-assign]
    return counts


def test_a_process_changes_the_state_it_wrote_last_in_one_round_trip(redis_keys, monkeypatch):
    # given a process's store, its round trips to Redis counted
    store = RedisStore(TEST_BROKER_URL, timeout=2.0)
    key = _key()
    redis_keys.append(key)
    counts = _round_trips(store)
    # when it reserves ten permits, no other process writing the credential's state
    for _ in range(10):
        assert store.reserve(key, rate=100_000.0, burst=1, max_wait=60.0).granted
    # then it read the state once, and each change after that was its compare-and-set alone
    assert counts == {"reads": 1, "compare_and_sets": 10}
    # and once Redis' clock was read longer ago than it trusts its own, it reads first
    monkeypatch.setattr(limiter, "CLOCK_TRUSTED_SECONDS", 0.0)
    assert store.reserve(key, rate=100_000.0, burst=1, max_wait=60.0).granted
    assert counts == {"reads": 2, "compare_and_sets": 11}


def test_a_change_that_meets_another_process_s_write_is_made_again_on_it(redis_keys):
    # given two processes' stores on one credential at 1 permit/s
    first, second = (RedisStore(TEST_BROKER_URL, timeout=2.0) for _ in range(2))
    key = _key()
    redis_keys.append(key)
    # when the first reserves a permit, the second one, and the first one more
    waits = [first.reserve(key, rate=1.0, burst=1, max_wait=60.0).wait]
    waits.append(second.reserve(key, rate=1.0, burst=1, max_wait=60.0).wait)
    counts = _round_trips(first)
    waits.append(first.reserve(key, rate=1.0, burst=1, max_wait=60.0).wait)
    # then the first's last change met the second's write and was made again on its value,
    # answered with it (no read): the permits are one interval apart, whoever took them
    assert counts == {"reads": 0, "compare_and_sets": 2}
    assert waits[0] == 0.0
    assert waits[1] == pytest.approx(1.0, abs=0.1)
    assert waits[2] == pytest.approx(2.0, abs=0.1)


def test_an_answer_that_changes_nothing_is_read_not_taken_from_the_value_written(redis_keys):
    # given a process that took the credential's one slot, and another process that gave it
    # back since
    first, second = (RedisStore(TEST_BROKER_URL, timeout=2.0) for _ in range(2))
    key = _key()
    redis_keys.append(key)
    slot = first.take(key, limit=1, ttl=30.0)
    assert slot is not None
    second.give_back(key, slot)
    counts = _round_trips(first)
    # when the first asks how many slots are held (a question that changes nothing)
    held = first.held(key)
    # then it read the state: none is held (the value it wrote last said one)
    assert held == 0
    assert counts == {"reads": 1, "compare_and_sets": 0}
