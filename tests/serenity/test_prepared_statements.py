"""`DB_PREPARED_STATEMENTS`: on PostgreSQL, a statement the hot paths repeat is prepared on its
connection once it has run 5 times, so PostgreSQL stops parsing and planning it; switched off,
nothing is prepared (for a pooler that drops prepared statements between transactions)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from jobs.models import AsyncJob, JobStatus
from tests.factories import AsyncJobFactory

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db


def _prepared_updates_of_jobs() -> list[str]:
    """The UPDATEs of jobs prepared on this connection, from PostgreSQL's session catalog view
    `pg_prepared_statements`: no model maps it, so this one read is SQL."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s AND NOT from_sql",
            ['UPDATE "jobs_asyncjob"%'],
        )
        return [row[0] for row in cursor.fetchall()]


def test_a_statement_that_has_run_five_times_is_prepared_on_its_connection():
    # given
    job = AsyncJobFactory(run_after=None)
    running = AsyncJob.objects.filter(pk=job.pk, status=JobStatus.IN_PROGRESS)
    # when: the same conditional update, five times, then a sixth, then a seventh
    for _ in range(5):
        running.update(run_count=0)
    prepared_after_five = _prepared_updates_of_jobs()
    running.update(run_count=0)
    prepared_after_six = _prepared_updates_of_jobs()
    changed = running.update(run_count=1)
    # then: prepared at its sixth run, and the prepared statement still writes
    assert prepared_after_five == []
    assert prepared_after_six == [
        'UPDATE "jobs_asyncjob" SET "run_count" = $1'
        ' WHERE ("jobs_asyncjob"."id" = $2 AND "jobs_asyncjob"."status" = $3)'
    ]
    assert changed == 1
    job.refresh_from_db()
    assert job.run_count == 1


@pytest.mark.parametrize(
    ("value", "expected"), [("true", "True 5 False"), ("false", "None None True")]
)
def test_the_setting_turns_server_side_binding_and_preparing_on_or_off(value, expected):
    # (off: behind PgBouncer in transaction mode, no server-side cursor either: SPEC §13.6)
    # when
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings as s; o = s.DATABASES['default']['OPTIONS'];"
            " print(o.get('server_side_binding'), o.get('prepare_threshold'),"
            " s.DATABASES['default'].get('DISABLE_SERVER_SIDE_CURSORS'))",
        ],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "true",
            "DATABASE_URL": "postgres://root@127.0.0.1:5432/serenity",
            "DB_PREPARED_STATEMENTS": value,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # then
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == expected
