"""Semrush upstream (the client, the limiter) and provisioning (settle, publish, the audit,
onboarding)."""

from __future__ import annotations

from config.env import env_float, env_int, env_str

# --- Semrush upstream -------------------------------------------------------------------------
SEMRUSH_BASE_URL = env_str("SEMRUSH_BASE_URL", "http://127.0.0.1:8765").rstrip("/")
SEMRUSH_API_TOKEN = env_str("SEMRUSH_API_TOKEN", "dev-token")
# Every upstream call's own bound (connect and each read).
SEMRUSH_TIMEOUT_SECONDS = 15.0
# The upstream limiter (SPEC §10.6, provisioning.quota / provisioning.limiter): one bucket per
# credential, in the broker's Redis (in-process for the embedded default); an org may override
# rate and burst. A rate of 0 turns the limiter off.
SEMRUSH_RATE_LIMIT_PER_SECOND = env_float("SEMRUSH_RATE_LIMIT_PER_SECOND", 10.0)
# Permits granted at once while fewer than that many were granted within the last second (an
# idle credential); the pace resumes one interval after them. Semrush counts requests over a
# sliding second, so the limiter never grants more than the rate within one whatever this says
# (provisioning.limiter_rules). 1: none. 5: a chain's step (a status read and a market's four
# calls) leaves at once on an idle credential (SPEC §12.5's end-to-end median), and a backlog
# that follows at once pauses at most half a second as the second's window fills.
SEMRUSH_RATE_LIMIT_BURST = 5
# The bucket paces this fraction below the rate, a margin for jitter in the requests' arrival
# (an upstream counting over a sliding second answers 429 to a client pacing at exactly its
# rate). 0.02: at 10/s, a request may arrive 20 ms late against the one ten permits after it;
# measured at Semrush's limits on the 2-core benchmark machine, arrivals jitter by 2 ms (up to
# 40 ms while a bulk onboarding is accepted). Raise it for an upstream far away.
SEMRUSH_RATE_LIMIT_MARGIN = 0.02
# A sync request waits at most this in all for its permits, else 503 upstreamBusy.
SEMRUSH_RATE_LIMIT_SYNC_WAIT_SECONDS = 5.0
# Upstream calls in flight at once per credential (SPEC §11.1, provisioning.limiter); 0: none.
SEMRUSH_CONCURRENCY_LIMIT = env_int("SEMRUSH_CONCURRENCY_LIMIT", 10)
# The language catalogue is read at most once per this, per process (SPEC §11.1).
SEMRUSH_LANGUAGES_CACHE_SECONDS = 86400.0

# --- Provisioning (SPEC §9) -------------------------------------------------------------------
# A sync request polls a new workspace's status this many times, this far apart (§4's settle).
SERENITY_SETTLE_POLL_ATTEMPTS = 30
SERENITY_SETTLE_POLL_INTERVAL_MS = 1000.0
# The chain's settle reads are these far apart (the last repeats).
SERENITY_PROVISION_BACKOFF_SECONDS: tuple[float, ...] = (5.0, 10.0, 20.0, 40.0, 80.0)
# An attempt pending this long ends stale; beat's sweep looks every interval.
SERENITY_PROVISIONING_STALE_AFTER_SECONDS = 900.0
SERENITY_STALE_SWEEP_INTERVAL_SECONDS = 60.0
# A chain's first status read waits the median settle time of the parent's last this many
# workspaces (SPEC §11.1); 0: read at once, as §6.3.
SERENITY_SETTLE_HISTORY = 20
# Publishing confirmed (SPEC §12.1, provisioning.publishing). A publish still running after
# the timeout ends the market `publish_failed` (`publishTimeout`); reads after the first are at
# least the back-off apart (then doubling); a sync request waits at most this long in all
# (3 reads) before a background job takes over.
SERENITY_PUBLISH_TIMEOUT_SECONDS = 900.0
SERENITY_PUBLISH_BACKOFF_SECONDS = 2.0
SERENITY_PUBLISH_SYNC_WAIT_SECONDS = 10.0
# Bounds of one request: markets of one activate, prompts of one push, markets of a brand.
SERENITY_MAX_ACTIVATE_MARKETS = 50
SERENITY_MAX_PROMPTS = 500
SERENITY_MAX_MARKETS_PER_BRAND = 50
# `provisioning_audit` takes at most this share of a credential's rate ...
SERENITY_AUDIT_RATE_SHARE = 0.5
# ... and reports its progress at least this often (seconds), on stderr.
SERENITY_AUDIT_PROGRESS_SECONDS = 10.0
# Work one org can queue (SPEC §12.4): onboarding items in progress at once per org (an org's
# own `onboarding_open_items_max` overrides it), markets in one onboarding, and the wait a
# refused onboarding is told (429 onboardingLimit, Retry-After).
SERENITY_ONBOARDING_OPEN_ITEMS_MAX = 5000
SERENITY_ONBOARDING_MARKETS_MAX = 5000
SERENITY_ONBOARDING_LIMIT_RETRY_SECONDS = 60
# An org's queued markets (reserved `creating` ones, and those activate-markets steps that have
# not started plan: an onboarding's, an async create's or activation's), at most (provisioning.
# caps); a request that would queue more is told 429 queuedMarketsLimit (Retry-After:
# SERENITY_ONBOARDING_LIMIT_RETRY_SECONDS).
SERENITY_ORG_QUEUED_MARKETS_MAX = 5000
# An onboarding's items read their workspaces' statuses through shared family listings (SPEC
# §12.5): a listing is made this long after the first read it answers was due, and answers
# every read of the onboarding due until then (a read with no other due by then lists at once).
SERENITY_ONBOARDING_STATUS_GATHER_SECONDS = 2.0

# --- The ledger of upstream writes (SPEC §13.4, provisioning/ledger/) -----------------------------
# Rows are kept this many days, then beat's hourly purge deletes them.
SERENITY_LEDGER_RETENTION_DAYS = 90.0

# --- The adaptive rate (SPEC §13.3, provisioning.limiter) --------------------------------------
# SEMRUSH_RATE_LIMIT_PER_SECOND is the ceiling; a 429 without Retry-After multiplies a
# credential's rate by the factor (at most once a second, never below 0.5/s); each spell of this
# many seconds without a 429 adds the step; one step below the rate that met the last 429 the
# climb holds this long before probing above it.
SEMRUSH_RATE_DECREASE_FACTOR = 0.8
SEMRUSH_RATE_INCREASE_STEP = 0.15
SEMRUSH_RATE_INCREASE_SPELL_SECONDS = 2.0
SEMRUSH_RATE_HOLD_SECONDS = 20.0

# --- A refused credential (SPEC §13.2, provisioning.credential_hold) ---------------------------
# A held credential is read again this often (beat), and a hold older than the max fails the
# work that waited.
SERENITY_CREDENTIAL_RECHECK_SECONDS = 60.0
SERENITY_CREDENTIAL_HOLD_MAX_SECONDS = 6 * 3600.0

# --- Drift (SPEC §13.1, provisioning/reconcile/) ----------------------------------------------
# Beat starts a plan-only reconciliation per Serenity org at most this often, spread over the
# interval (each org at its own offset); it looks for due orgs every tick.
SERENITY_DRIFT_SWEEP_INTERVAL_SECONDS = 6 * 3600.0
SERENITY_DRIFT_SWEEP_TICK_SECONDS = 300.0
# Brands a plan's task reads before it hands the rest to the next task (the worker is free
# between batches, so an org's plan never holds it for long).
SERENITY_DRIFT_PLAN_BATCH = 25
