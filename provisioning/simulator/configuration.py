"""The simulator's configuration (`GET|POST /__sim/config`): its defaults and its validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provisioning.simulator.wire import SimulatorConfigError, _is_int, _is_number

SETTLE_OUTCOMES = ("created", "failed", "stuck")

DEFAULT_CONFIG: dict[str, Any] = {
    # About 3 s is what was observed live (reference §5); tests shrink it through /__sim/config.
    "settleSeconds": 3.0,
    "settleOutcome": "created",
    "latencyMs": 0,
    "errorRate5xx": 0.0,
    "seed": 0,
    "rateLimitPerSecond": None,
    # Calls of one token in flight at once (SPEC §11.1); null: no limit.
    "concurrencyLimit": None,
    # null: every 429 (rate, concurrency or scripted) carries no Retry-After.
    "retryAfterSeconds": 1,
    "publishSeconds": 0.0,
    # How a publish ends once `publishSeconds` have passed: `live`, or `failed`
    # (`initial_publish_failed` with a `publishing_failed_reason`), fixed at the publish.
    "publishOutcome": "live",
    # Keep each API exchange's request and answer bodies for `GET /__sim/exchanges` (tests
    # check them against the contract description); off by default: a long run's listings
    # would pile up in memory.
    "recordExchanges": False,
}

PUBLISH_OUTCOMES = ("live", "failed")
PUBLISH_FAILED_REASON = "simulated publish failure"


def validate_config(updates: Mapping[str, Any]) -> dict[str, Any]:
    """Check a partial configuration; return it normalised or raise SimulatorConfigError."""
    if not isinstance(updates, Mapping):
        raise SimulatorConfigError("config must be a JSON object")
    clean: dict[str, Any] = {}
    for key, value in updates.items():
        if key not in DEFAULT_CONFIG:
            raise SimulatorConfigError(f"unknown config key {key!r}")
        if key == "retryAfterSeconds" and value is None:
            pass
        elif key in ("settleSeconds", "latencyMs", "retryAfterSeconds", "publishSeconds"):
            if not _is_number(value) or value < 0:
                raise SimulatorConfigError(f"{key} must be a number >= 0")
        elif key == "errorRate5xx":
            if not _is_number(value) or not 0 <= value <= 1:
                raise SimulatorConfigError("errorRate5xx must be a number between 0 and 1")
        elif key == "recordExchanges":
            if not isinstance(value, bool):
                raise SimulatorConfigError("recordExchanges must be a boolean")
        elif key == "publishOutcome":
            if value not in PUBLISH_OUTCOMES:
                raise SimulatorConfigError(f"publishOutcome must be one of {PUBLISH_OUTCOMES}")
        elif key == "settleOutcome":
            if value not in SETTLE_OUTCOMES:
                raise SimulatorConfigError(f"settleOutcome must be one of {SETTLE_OUTCOMES}")
        elif key == "seed":
            if value is not None and not _is_int(value):
                raise SimulatorConfigError("seed must be an integer or null")
        elif (
            key in ("rateLimitPerSecond", "concurrencyLimit")
            and value is not None
            and (not _is_int(value) or value < 0)
        ):
            raise SimulatorConfigError(f"{key} must be an integer >= 0 or null")
        clean[key] = value
    return clean
