"""The limiter's rules (SPEC §10.6, §11.1, §12.3, §13.3), written once: the arithmetic of one
credential's state, applied atomically by a store of :mod:`provisioning.limiter` on its own clock.
Pure functions of (state, now) → (answer, new state).

The bucket: GCRA with reservations
----------------------------------
A bucket's rate state is ``tat`` (the "theoretical arrival time" of the next permit, epoch
seconds), for rate ``r`` (interval ``T = 1/r``) and burst ``b`` (tolerance ``τ = b·T``). A caller
asks for a permit with a patience ``w``: its permit is due at ``max(tat, now) + T - τ``; if that is
at most ``w`` away the permit is *reserved* (``tat`` advances by ``T``) and the caller sleeps
until it is due, else nothing is reserved and the caller learns how long it would have waited.
Callers with little patience never push the horizon beyond what they accepted.

Upstream counts requests over a sliding second, so no more than ``n = ⌈r⌉`` permits fall within
any ``n·T`` (at least a second; ``recent``: the last ``n`` permits' times), and the burst is an
idle credential's only: ``b`` applies while fewer than ``b`` permits fell within the last
``n·T``, else permits are ``T`` apart. So a chain's calls on an idle credential leave at once,
instead of ``T`` apart, and a busy credential is paced as with ``b = 1``: a burst that meets a
backlog is followed by the pace, not by a second burst a window later. The burst is not a debt:
the pace resumes one interval after its last permit (a step right after another's burst is not
held back for the intervals the burst skipped); the window alone keeps the second within ``n``
permits, so a backlog that follows a burst at once meets one pause as the window fills.

A refused caller gets a place in its org's queue (``queues``, one horizon per org): its "retry
in" is its place, so refused steps come back spaced at the bucket's pace instead of all at
once. Each org's places are spaced by ``T`` times the number of orgs waiting: while several
orgs wait their places interleave (round-robin), and a refused step of an org with nothing
waiting gets the next free permit, not the end of another org's backlog; and while an org's
queue is short (it ends within ``SHORT_QUEUE_SECONDS``, before the caller's own), other orgs'
first permits wait for it, so that its step, back at its place, finds the permit free instead
of a bucket kept full by a backlog's steps coming back. And while another org waits, the first
refused step of an org with no queue has its permit kept for it (``claims``: the next free
permit is reserved in its org's name, and the org's next first permit takes it): steps already
under way reserve ahead of every place, so a second org's step would otherwise find the bucket
taken again each time it came back (SPEC §13.7: its first permit within a permit interval or
two of asking, however long the other org's queue). For the same reason an org with steps in its
queue takes a first permit only when it is the next free one (``QUEUED_FIRST_PERMITS``, whatever
the caller's patience): its queue paces it already, and its steps reserving deeper would make
every call of another org's step wait behind them. One interval per
place, not the permits a caller will take: a caller that comes back before its turn is
refused again in milliseconds and takes a later place, while places spaced for more permits
than the callers then take leave the credential idle (and an idle bucket's burst meets
upstream's 429s).

A 429 with ``Retry-After`` pauses the credential: ``tat`` moves to the end of the pause for every
process.

The adaptive rate (SPEC §13.3): Semrush's quota is shared with every other client of the account
and says nothing, so the rate the bucket paces at is learnt, AIMD-style (as AWS's SDKs learn a
throttling server's rate). It starts at the configured rate (the ceiling); a 429 *without*
``Retry-After`` multiplies it by ``Adaptation.decrease`` (at most once a second, however many
429s arrive at once, never below ``Adaptation.floor``) and drains the burst (the next permit is
one new interval away); every ``Adaptation.spell`` seconds without a 429 adds ``Adaptation.step``
permits/s, up to the ceiling. The climb is cautious where the last 429 came: it stops one step
below the rate that met it (``peak``) for ``Adaptation.hold`` seconds before probing above it,
so a credential whose share stays put meets one 429 per hold rather than one per climb (SPEC
§13.7: < 2 % of calls), while a share that grew is found a hold later (≥ 8.5 of 10/s within
120 s). The state keeps the rate after the last 429 (``rate``), when (``rate_at``) and the
rate that met it (``peak``): the current rate is computed from them on the store's clock
(:func:`current_rate`), so raising it costs no write.

Slots (SPEC §11.1): ``slots`` maps each call in flight to its expiry (the client's timeout + 5 s),
so a process killed in the middle of a call leaks nothing, and ``holders`` to its org. A caller
refused a slot may wait for one (``waiters``: its org and until when): a slot given back is
handed over at once to a waiter of the org holding the fewest slots (a second org's step is
not served after every waiting step of another's onboarding), through a per-waiter list the
waiter blocks on (Redis ``BLPOP``; a queue in this process). ``hold`` learns how long a slot is
held (a moving average): a caller that stops waiting comes back when its turn comes
(:func:`slot_turn`), not after a fixed back-off.

"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

# An adapted rate outlives the credential's idle TTL by this much: an idle spell is no proof
# that upstream's share came back (it is raised as time passes anyway: `current_rate`).
ADAPTED_TTL_SECONDS = 3600.0
# A queue that ends within this is short: other orgs' first permits wait for it (docstring).
SHORT_QUEUE_SECONDS = 1.0
# A first permit of an org with steps in its queue is due within this many intervals, or the step
# takes a place (module docstring).
QUEUED_FIRST_PERMITS = 1.0
# The most permits' times the state keeps for the window (`_window`): a rate above this is
# held to it within its share of a second.
WINDOW_PERMITS_MAX = 50
# A permit kept for an org (`claims`) that it has not come for this long after it fell due is
# given up.
CLAIM_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class Reservation:
    """A bucket's answer: `granted` (the permit is reserved, due in `wait` seconds) or not (the
    caller's place in its org's queue is `wait` seconds away)."""

    granted: bool
    wait: float


@dataclass(frozen=True)
class Adaptation:
    """The adaptive rate's rules (module docstring; settings `SEMRUSH_RATE_DECREASE_FACTOR`,
    `SEMRUSH_RATE_INCREASE_STEP`, `SEMRUSH_RATE_INCREASE_SPELL_SECONDS`,
    `SEMRUSH_RATE_HOLD_SECONDS`)."""

    decrease: float = 0.8
    step: float = 0.15
    spell: float = 2.0
    floor: float = 0.5
    hold: float = 20.0


DEFAULT_ADAPTATION = Adaptation()


@dataclass(frozen=True)
class State:
    """One credential's state (module docstring); `queue`: the floor a pause sets for every
    place; `rate` (0: not adapted, the ceiling) as of `rate_at`, last lowered at `lowered_at`
    from `peak` (0: never)."""

    tat: float | None = None
    queue: float = 0.0
    pause_end: float = 0.0
    rate: float = 0.0
    rate_at: float = 0.0
    lowered_at: float = 0.0
    peak: float = 0.0
    queues: dict[str, float] = field(default_factory=dict)
    claims: dict[str, float] = field(default_factory=dict)
    slots: dict[str, float] = field(default_factory=dict)
    holders: dict[str, str] = field(default_factory=dict)
    waiters: dict[str, list[Any]] = field(default_factory=dict)
    hold: float = 0.0
    recent: list[float] = field(default_factory=list)

    def expires(self, now: float) -> float:
        """When nothing in this state matters any more."""
        return max(
            [
                self.tat or now,
                self.queue,
                self.pause_end,
                now,
                self.rate_at + ADAPTED_TTL_SECONDS if self.rate > 0 else now,
                *self.queues.values(),
                *(due + CLAIM_GRACE_SECONDS for due in self.claims.values()),
                *self.slots.values(),
                *(until for _, until in self.waiters.values()),
            ]
        )


# --- the arithmetic ---------------------------------------------------------------------------


def current_rate(
    state: State, now: float, *, ceiling: float, adapt: Adaptation = DEFAULT_ADAPTATION
) -> float:
    """The rate the credential is paced at now: the adapted rate raised by one step per quiet
    spell since the last 429, held one step below the rate that met the last lowering for
    `adapt.hold` seconds, at most `ceiling` (module docstring)."""
    if state.rate <= 0:
        return ceiling
    elapsed = max(now - state.rate_at, 0.0)
    if adapt.spell <= 0:
        return min(ceiling, state.rate)
    if state.peak <= 0:
        return min(ceiling, state.rate + adapt.step * math.floor(elapsed / adapt.spell))
    near = max(state.peak - adapt.step, state.rate)
    # Spells to climb to `near` (none when there already), then the hold, then a step a spell.
    climbing = math.ceil((near - state.rate) / adapt.step - 1e-9) if adapt.step > 0 else 0
    held_from = climbing * adapt.spell
    if elapsed < held_from:
        return min(ceiling, state.rate + adapt.step * math.floor(elapsed / adapt.spell), near)
    probing = math.floor(max(elapsed - held_from - adapt.hold, 0.0) / adapt.spell)
    return min(ceiling, near + adapt.step * probing)


def reserve(
    state: State,
    now: float,
    *,
    rate: float,
    burst: int,
    max_wait: float,
    org: str = "",
    first: bool = False,
    adapt: Adaptation = DEFAULT_ADAPTATION,
) -> tuple[Reservation, State]:
    """A permit reserved within `max_wait`, or the caller's place in its org's queue, at the
    credential's adapted rate (`rate` is the ceiling). A caller's `first` permit also waits
    while another org's short queue ends before its own (module docstring)."""
    interval = 1.0 / current_rate(state, now, ceiling=rate, adapt=adapt)
    tolerance = _idle_burst(state.recent, now, interval, burst) * interval
    start = max(state.tat if state.tat is not None else now, now)
    paced_at = start + interval - tolerance
    permit_at = max(paced_at, _window_opens(state.recent, interval))
    wait = max(permit_at - now, 0.0)
    # The pace resumes one interval after a permit the burst let go at once, not where pacing
    # the burst would have put it; one the window held back is followed an interval after it.
    tat = max(now if paced_at <= now else start, permit_at) + interval
    queues = {o: place for o, place in state.queues.items() if place > now}
    claims = {o: due for o, due in state.claims.items() if due > now - CLAIM_GRACE_SECONDS}
    if first and org in claims:
        due = claims.pop(org)
        return Reservation(True, max(due - now, 0.0)), replace(state, claims=claims)
    if first and org in queues:
        # A queued org's first permit: the next free one at most (module docstring).
        max_wait = min(max_wait, interval * QUEUED_FIRST_PERMITS)
    # With no burst permits are an interval apart: the window holds by itself, kept empty.
    bursting = min(burst, _window(interval)[0]) > 1
    recent = _recent(state.recent, max(permit_at, now), now, interval) if bursting else []
    if wait <= max_wait and not (first and _behind_a_short_queue(queues, org, now)):
        return Reservation(True, wait), replace(state, tat=tat, claims=claims, recent=recent)
    if first and org not in queues and (queues.keys() | claims.keys()) - {org}:
        # Another org waits: this org's first permit is kept for it at the next free one.
        claims[org] = permit_at
        return Reservation(False, wait), replace(state, tat=tat, claims=claims, recent=recent)
    waiting = len(queues) + (0 if org in queues else 1)
    place = max(queues.get(org, 0.0), state.queue, permit_at)
    queues[org] = place + interval * waiting
    return Reservation(False, place - now), replace(state, queues=queues, claims=claims)


def _window(interval: float) -> tuple[int, float]:
    """The most permits within any span, and that span (module docstring): ⌈r⌉ and ⌈r⌉·T; at
    a rate above `WINDOW_PERMITS_MAX`, that many within their share of a second (the state
    keeps their times)."""
    count = min(max(math.ceil(1.0 / interval - 1e-9), 1), WINDOW_PERMITS_MAX)
    return count, count * interval


def _window_opens(recent: list[float], interval: float) -> float:
    """The earliest time a permit keeps at most ⌈r⌉ permits within any ⌈r⌉·T (0: now)."""
    count, span = _window(interval)
    return recent[-count] + span - 1e-9 if len(recent) >= count else 0.0


def _idle_burst(recent: list[float], now: float, interval: float, burst: int) -> int:
    """`burst` (at most ⌈r⌉) while fewer than that many permits fell within the last window,
    else 1."""
    count, span = _window(interval)
    burst = min(burst, count)
    return burst if sum(1 for at in recent if at > now - span) < burst else 1


def _recent(recent: list[float], at: float, now: float, interval: float) -> list[float]:
    """`recent` with a permit used at `at`: the last ⌈r⌉ within the window before `now`, in
    time order (an older one bounds no later permit: at a high rate the state keeps few)."""
    count, span = _window(interval)
    return sorted([t for t in recent if t > now - span] + [at])[-count:]


def _behind_a_short_queue(queues: dict[str, float], org: str, now: float) -> bool:
    """Whether another org's queue ends within `SHORT_QUEUE_SECONDS` and before `org`'s."""
    own = queues.get(org, math.inf)
    return any(
        other != org and end <= now + SHORT_QUEUE_SECONDS and end < own
        for other, end in queues.items()
    )


def paused(
    state: State,
    now: float,
    *,
    rate: float,
    burst: int,
    seconds: float | None,
    adapt: Adaptation = DEFAULT_ADAPTATION,
) -> State:
    """The state after a 429 (`rate` is the ceiling). With a Retry-After (`seconds`) the next
    permit is due when it ends; without one (None) the rate is lowered (at most once a
    second) and the next permit is one new interval away. Either way the quiet spell that
    raises the rate starts again, and no burst follows."""
    current = current_rate(state, now, ceiling=rate, adapt=adapt)
    lowered_at, peak = state.lowered_at, state.peak
    if seconds is None:
        if now - state.lowered_at >= 1.0:
            peak = current
            current = max(current * adapt.decrease, min(adapt.floor, rate))
            lowered_at = now
        seconds = 1.0 / current
    interval = 1.0 / current
    pause_end = now + seconds
    return replace(
        state,
        # The burst the first permit after the pause gets (`_idle_burst`), so that it is due
        # when the pause ends.
        tat=max(
            state.tat if state.tat is not None else now,
            pause_end + (_idle_burst(state.recent, pause_end, interval, burst) - 1) * interval,
        ),
        queue=max(state.queue, pause_end),
        pause_end=max(state.pause_end, pause_end),
        rate=current if current < rate else 0.0,
        rate_at=now,
        lowered_at=lowered_at,
        peak=peak,
    )


def slot_taken(
    state: State,
    now: float,
    *,
    slot: str,
    limit: int,
    ttl: float,
    org: str = "",
    waiter: str | None = None,
    patience: float = 0.0,
) -> tuple[bool, State]:
    """`slot` held until `now + ttl` if fewer than `limit` unexpired slots are held; else
    `waiter` (if any) waits for one until `now + patience` (module docstring)."""
    live = {held: until for held, until in state.slots.items() if until > now}
    holders = {held: o for held, o in state.holders.items() if held in live}
    waiters = {w: v for w, v in state.waiters.items() if v[1] > now}
    if len(live) < limit:
        return True, replace(
            state,
            slots={**live, slot: now + ttl},
            holders={**holders, slot: org},
            waiters=waiters,
        )
    if waiter is not None and patience > 0:
        waiters[waiter] = [org, now + patience]
    return False, replace(state, slots=live, holders=holders, waiters=waiters)


def slot_and_permit(
    state: State,
    now: float,
    *,
    slot: str,
    limit: int,
    ttl: float,
    org: str,
    waiter: str | None,
    patience: float,
    rate: float,
    burst: int,
    max_wait: float,
    first: bool,
    adapt: Adaptation = DEFAULT_ADAPTATION,
) -> tuple[tuple[bool, Reservation | None], State]:
    """A call's slot (:func:`slot_taken`) and, when it has one, its permit (:func:`reserve`) in
    one change: a call's common case in one store round trip instead of two. Answers (whether
    the slot was free, the permit's answer: None when the slot was not). A caller refused its
    permit holds no slot (it is not taken)."""
    taken, with_slot = slot_taken(
        state, now, slot=slot, limit=limit, ttl=ttl, org=org, waiter=waiter, patience=patience
    )
    if not taken:
        return (False, None), with_slot
    answer, after = reserve(
        state, now, rate=rate, burst=burst, max_wait=max_wait, org=org, first=first, adapt=adapt
    )
    if answer.granted:
        after = replace(after, slots=with_slot.slots, holders=with_slot.holders)
    return (True, answer), after


def slot_given_back(
    state: State, now: float, *, slot: str, ttl: float, handed: str
) -> tuple[tuple[str, str] | None, State]:
    """The state once `slot` is given back: handed over as `handed` to the waiter of the org
    holding the fewest slots (its first waiter), answered as (waiter, slot); None: nobody
    waits."""
    hold = state.hold
    if slot in state.slots:
        held = max(now - (state.slots[slot] - ttl), 0.0)
        hold = held if hold <= 0 else 0.8 * hold + 0.2 * held
    slots = {s: until for s, until in state.slots.items() if s != slot and until > now}
    holders = {s: o for s, o in state.holders.items() if s in slots}
    waiters = {w: v for w, v in state.waiters.items() if v[1] > now}
    after = replace(state, slots=slots, holders=holders, waiters=waiters, hold=hold)
    if not waiters:
        return None, after
    held_by = Counter(holders.values())
    chosen = min(waiters, key=lambda w: held_by[waiters[w][0]])
    org = waiters.pop(chosen)[0]
    return (chosen, handed), replace(
        after, slots={**slots, handed: now + ttl}, holders={**holders, handed: org}
    )


def slot_turn(state: State, now: float, *, limit: int) -> float:
    """Seconds until a caller that stopped waiting for a slot may find one: its turn behind
    the waiters, at the pace slots are given back (`hold` ÷ `limit` each)."""
    waiting = sum(1 for _, until in state.waiters.values() if until > now)
    pace = (state.hold or 0.1) / max(limit, 1)
    return max((waiting + 1) * pace, 0.01)
