"""The job engine and webhook deliveries."""

from __future__ import annotations

from config.sections.core import DEBUG

# --- Jobs (SPEC §9; JOBS_COUNTDOWN_MAX_SECONDS follows the broker: Celery below) --------------
# Finished jobs are purged after this many days.
JOBS_RETENTION_DAYS = 7.0
# Beat's dispatcher publishes due and lost jobs every interval.
JOBS_DISPATCH_INTERVAL_SECONDS = 2.0
# A claimed job not finished or renewed by then is re-published.
JOBS_LEASE_SECONDS = 120.0
# A step whose claim expired this many times (its worker died each time) ends FAILED jobFailed.
JOBS_MAX_DELIVERIES = 10
# Publishing a job to the broker from the request path gives up after this (the dispatcher
# publishes it later).
JOBS_PUBLISH_TIMEOUT_SECONDS = 1.0
# A worker that promotes a workspace runs the chain's next step itself, right after, instead of
# sending it through the broker to any worker (one task, message and claim round trip fewer
# per chain). Off: every step is its own message.
JOBS_HAND_OVER_INLINE = True

# --- Webhooks (SPEC §11.3) --------------------------------------------------------------------
# Deliveries to loopback, private, link-local, multicast and reserved addresses (and http://
# URLs) are refused unless this is on: with DEBUG (./scripts/run's receivers listen on the
# loopback) and in tests only.
SERENITY_WEBHOOK_ALLOW_PRIVATE = DEBUG
# A webhook URL names its scheme's standard port (443 for https, 80 for http) or none. Lifted
# with the address rule (development: a local receiver on any port) and in the test settings.
WEBHOOK_STANDARD_PORTS_ONLY = not SERENITY_WEBHOOK_ALLOW_PRIVATE
# Every attempt ends within this many seconds of wall clock, connect to status line (SPEC §12.4);
# before it starts, the attempt's job lease is renewed past it (webhooks.delivery).
WEBHOOK_ATTEMPT_DEADLINE_SECONDS = 10.0
# An org's pending deliveries; past it, the oldest pending end `failed` with `overflow`.
WEBHOOK_PENDING_MAX_PER_ORG = 10_000
# An endpoint whose every attempt failed for this long is disabled, with the reason shown.
WEBHOOK_FAILING_DISABLE_SECONDS = 86_400.0
# Webhook attempts in flight (SPEC §13.6, §13.7; webhooks.slots): at most this many of one org
# at once, every worker together; and at most this share of a worker's pool slots (at least
# one; all of them for a worker that consumes the webhook queue alone), so provisioning steps
# always have slots.
WEBHOOK_ATTEMPTS_PER_ORG = 2
WEBHOOK_WORKER_SHARE = 0.5
