"""Wait until PostgreSQL (DATABASE_URL) or Redis (CELERY_BROKER_URL) answers; used by
`scripts/test`.

    python scripts/check_services.py postgres|redis [--wait SECONDS]

Exit status 0 when the service answered, 1 when it did not within the wait.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from urllib.parse import urlsplit

DEFAULT_DATABASE_URL = "postgres://root@127.0.0.1:5432/serenity"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"


def postgres_answers(url: str) -> bool:
    import psycopg

    parts = urlsplit(url)
    try:
        # The maintenance database: the project's own may not exist yet (tests create theirs).
        with psycopg.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 5432,
            user=parts.username or None,
            password=parts.password or None,
            dbname="postgres",
            connect_timeout=3,
        ) as connection:
            connection.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3).ping())
    except redis.RedisError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("service", choices=["postgres", "redis"])
    parser.add_argument("--wait", type=float, default=0.0)
    args = parser.parse_args()
    if args.service == "postgres":
        url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
        probe = postgres_answers
    else:
        url = os.environ.get("CELERY_BROKER_URL") or DEFAULT_BROKER_URL
        probe = redis_answers
    deadline = time.monotonic() + args.wait
    while True:
        if probe(url):
            return 0
        if time.monotonic() >= deadline:
            return 1
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
