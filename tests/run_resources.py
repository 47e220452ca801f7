"""What a test run is given and what it owns (SPEC §13.6 "The suite uses what it is given").

Given: `DATABASE_URL` and `CELERY_BROKER_URL`, as the README says (pyproject's `env` holds their
local defaults). Owned, one per run so that concurrent runs on one machine never collide, and
gone when the run ends:
- the test database: `test_<the given database's name>_<run>` on the given server, with its
  credentials (pytest-django creates and drops it);
- a Redis database of the given server (same host, port, credentials; number 1 + run % 15, never
  the given one), in which the run's keys carry its queue's name and are deleted at the end;
- a folder for `SERENITY_VAR_DIR` (the Prometheus files of every process of the run, the static
  root), deleted at the end.
"""

from __future__ import annotations

import contextlib
import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

DEADLINES = "_kombu.binding_deadlines"


def run_database_name(given_name: str, run_id: int) -> str:
    return f"test_{given_name}_{run_id}"


def run_broker_url(given_url: str, run_id: int) -> str:
    """The run's Redis: the given server (scheme, credentials, host, port, query), its own
    database number."""
    parts = urlsplit(given_url)
    if parts.scheme not in {"redis", "rediss"}:
        raise RuntimeError(
            f"The suite runs on Redis: CELERY_BROKER_URL must be a redis:// URL, not {given_url!r}"
        )
    return urlunsplit((parts.scheme, parts.netloc, f"/{1 + run_id % 15}", parts.query, ""))


def database_url(settings_dict: dict[str, object], name: str) -> str:
    """A PostgreSQL URL to database `name` on the server and with the credentials of a Django
    database entry (the given DATABASE_URL's)."""
    user = str(settings_dict.get("USER") or "")
    password = str(settings_dict.get("PASSWORD") or "")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = str(settings_dict.get("HOST") or "127.0.0.1")
    port = str(settings_dict.get("PORT") or "5432")
    return f"postgres://{credentials}{host}:{port}/{name}"


def names_queue(name: bytes, queue: str) -> bool:
    """Whether a key (or a binding deadline's member) is `queue`'s or one of its sub-queues'
    (`.webhooks`, `.periodic`, kombu's priority lists), by the whole name: `serenity-test-12`
    is not `serenity-test-123`'s."""
    return (
        re.search(rb"(?:^|[.:])" + re.escape(queue.encode()) + rb"(?:$|[.\x06])", name) is not None
    )


def run_keys(client: redis.Redis, queue: str) -> tuple[list[bytes], list[bytes]]:
    """The keys of `queue` (its lists, kombu's bindings of it) and its members of kombu's shared
    binding deadlines."""
    keys = [k for k in client.scan_iter(match=f"*{queue}*", count=1000) if names_queue(k, queue)]
    members = [m for m in client.zrange(DEADLINES, 0, -1) if names_queue(m, queue)]
    return keys, members


def delete_run_keys(client: redis.Redis, queue: str) -> int:
    """Delete `queue`'s keys and deadline entries (`run_keys`); returns how many keys went."""
    keys, members = run_keys(client, queue)
    if keys:
        client.delete(*keys)
    if members:
        client.zrem(DEADLINES, *members)
    return len(keys)


def remove_folder(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_if_empty(path: Path) -> None:
    """Remove `path` and its empty folders; anything with a file in it stays (another run's)."""
    if not path.is_dir():
        return
    for folder in sorted((p for p in path.rglob("*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()
