"""config.settings_test: the internal knobs a process the tests start takes from
SERENITY_TEST_SETTINGS, with what settings.py derives from them derived again; the production
settings module never reads that variable (SPEC §12.3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PRINT = """
import json
from django.conf import settings as s
print(json.dumps({
    "queue": s.CELERY_TASK_DEFAULT_QUEUE,
    "queues": sorted(q.name for q in s.CELERY_TASK_QUEUES),
    "dispatch": s.CELERY_BEAT_SCHEDULE["jobs-dispatch"],
    "backoff": [type(s.SERENITY_PROVISION_BACKOFF_SECONDS).__name__,
                list(s.SERENITY_PROVISION_BACKOFF_SECONDS)],
    "conn_max_age": s.DATABASES["default"]["CONN_MAX_AGE"],
    "writes": s.SERENITY_THROTTLE_WRITES,
}))
"""


def _settings_of(module: str, overrides: object | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SERENITY_TEST_SETTINGS"}
    env["DJANGO_SETTINGS_MODULE"] = module
    if overrides is not None:
        env["SERENITY_TEST_SETTINGS"] = json.dumps(overrides)
    return subprocess.run(
        [sys.executable, "-c", _PRINT],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _printed(completed: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert completed.returncode == 0, completed.stderr
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def test_overrides_reach_the_process_and_what_follows_from_them():
    # when
    printed = _printed(
        _settings_of(
            "config.settings_test",
            {
                "CELERY_TASK_DEFAULT_QUEUE": "q-1",
                "JOBS_DISPATCH_INTERVAL_SECONDS": 0.5,
                "SERENITY_PROVISION_BACKOFF_SECONDS": [0.3, 0.3],
                "DB_CONN_MAX_AGE": 60,
            },
        )
    )
    # then
    assert printed == {
        "queue": "q-1",
        "queues": ["q-1", "q-1.periodic", "q-1.webhooks"],
        "dispatch": {
            "task": "jobs.dispatch_due_jobs",
            "schedule": 0.5,
            "options": {"queue": "q-1.periodic", "expires": 0.5},
        },
        "backoff": ["tuple", [0.3, 0.3]],
        "conn_max_age": 60,
        "writes": "100000/s",
    }


def test_without_overrides_the_test_settings_only_lift_the_throttles_and_connection_age():
    # when
    printed = _printed(_settings_of("config.settings_test", None))
    # then
    assert printed["queue"] == "serenity"
    assert printed["backoff"] == ["tuple", [5.0, 10.0, 20.0, 40.0, 80.0]]
    assert printed["conn_max_age"] == 0
    assert printed["writes"] == "100000/s"


def test_the_production_settings_never_read_the_overrides():
    # when
    printed = _printed(_settings_of("config.settings", {"CELERY_TASK_DEFAULT_QUEUE": "q-2"}))
    # then
    assert printed["queue"] == "serenity"
    assert printed["writes"] == "30/s"
    assert printed["conn_max_age"] == 60


def test_an_override_that_is_not_a_setting_name_stops_the_process():
    # when
    completed = _settings_of("config.settings_test", {"queue": "q-3"})
    # then
    assert completed.returncode != 0
    assert "SERENITY_TEST_SETTINGS must map setting names to values" in completed.stderr
