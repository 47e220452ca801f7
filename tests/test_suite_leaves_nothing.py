"""The suite uses what it is given and leaves nothing behind (SPEC §13.6). Found from outside:
the suite ignored the `CELERY_BROKER_URL` it was given (Redis database `1 + pid % 15` on
127.0.0.1 unless an undocumented variable was set) and left Redis keys and a
folder behind. Here a run of a few tests (a real Celery worker running a chain included) is
started as a developer starts one, with the README's variables only; once it has ended, its
database, its Redis keys and its folders are gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import redis

from tests.harness import _admin_url
from tests.run_resources import run_broker_url, run_database_name, run_keys

ROOT = Path(__file__).resolve().parent.parent
SELECTION = [
    "tests/chains/test_async_endpoints.py::test_async_market_create_equals_sync",
    "tests/test_celery_operations.py::test_beat_publishes_a_message_that_expires",
]


def test_the_broker_of_a_run_is_the_given_redis_server_with_a_database_of_its_own():
    # when / then: host, port and credentials as given, never the given database
    assert run_broker_url("redis://:secret@redis.internal:6380/0", 7) == (
        "redis://:secret@redis.internal:6380/8"
    )
    assert run_broker_url("rediss://cache.example:6379/3?ssl_cert_reqs=none", 29) == (
        "rediss://cache.example:6379/15?ssl_cert_reqs=none"
    )
    # and no undocumented variable is read by the suite any more
    sources = "\n".join(
        p.read_text() for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name
    )
    assert "SERENITY_TEST_BROKER_URL" not in sources
    assert "SERENITY_STACK_ADMIN_DATABASE_URL" not in sources


def test_a_run_leaves_no_database_redis_key_or_folder_behind(tmp_path):
    # given the README's variables only (the outer run's own folder is not passed on)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "SERENITY_", "PROMETHEUS_"))
        and k != "DJANGO_SETTINGS_MODULE"
    }
    keys_before, files_before = _periodic_test_keys(), _given_var_files()
    # when a run of a few tests, a real worker among them, starts and ends
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SELECTION],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output, _ = run.communicate(timeout=600)
    assert run.returncode == 0, output[-5000:]
    # then its test database is gone from the given server
    database = run_database_name(urlsplit(os.environ["DATABASE_URL"]).path.lstrip("/"), run.pid)
    with psycopg.connect(_admin_url(os.environ["DATABASE_URL"]), autocommit=True) as admin:
        left = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchall()
    assert left == []
    # and no key of its own is left in its Redis database of the given server
    broker = run_broker_url(os.environ["CELERY_BROKER_URL"], run.pid)
    assert urlsplit(broker).hostname == urlsplit(os.environ["CELERY_BROKER_URL"]).hostname
    client = redis.Redis.from_url(broker)
    try:
        assert run_keys(client, f"serenity-test-{run.pid}") == ([], [])
        assert _periodic_test_keys() - keys_before == set()
    finally:
        client.close()
    # and no folder of its own, nor a file of its own in the folder pyproject's `env` names
    assert sorted(Path("/tmp").glob(f"serenity-test-{run.pid}-*")) == []
    new_files = _given_var_files() - files_before
    assert sorted(f for f in new_files if f.name.endswith(f"_{run.pid}.db")) == []


def _periodic_test_keys() -> set[bytes]:
    """kombu's keys of the queues tests/test_celery_operations.py makes, in every database of the
    given Redis a run may have (earlier runs of older code left some)."""
    found: set[bytes] = set()
    for number in range(16):
        url = run_broker_url(os.environ["CELERY_BROKER_URL"], number - 1)
        client = redis.Redis.from_url(url)
        try:
            found |= {url.encode() + b" " + k for k in client.scan_iter(match="*periodic-test-*")}
        finally:
            client.close()
    return found


def _given_var_files() -> set[Path]:
    """The files in the folder pyproject's `env` gives SERENITY_VAR_DIR (older runs left
    theirs)."""
    return {p for p in Path("/tmp/serenity-test-var").rglob("*") if p.is_file()}
