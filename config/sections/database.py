"""The database: PostgreSQL from DATABASE_URL, else SQLite in the var folder."""

from __future__ import annotations

import dj_database_url

from config.env import env_bool, env_str
from config.sections.core import VAR_DIR

# --- Database ---------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'serenity.sqlite3'}"
# A connection is kept this long (seconds) by a web or worker thread, with health checks.
DB_CONN_MAX_AGE = 60
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=DB_CONN_MAX_AGE)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the writer; IMMEDIATE makes a transaction take the write lock
    # at BEGIN, so conditional updates serialize instead of failing with "database is locked".
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
else:
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = 5
    if env_bool("DB_PREPARED_STATEMENTS", True):
        # The hot paths send the same few dozen statements over and over, and PostgreSQL
        # parses and plans each anew: ~40 % of its CPU per chain. With server-side binding,
        # psycopg prepares a statement once it has run 5 times on a connection, and PostgreSQL
        # then skips both. Off for a pooler that does not keep prepared statements across
        # transactions (PgBouncer in transaction mode before 1.21).
        DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)
    else:
        # Behind a pooler in transaction mode a connection is another one at each transaction:
        # a server-side cursor (`.iterator()` outside a transaction) would not survive either.
        DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# Django reads ATOMIC_REQUESTS per database, here (a top-level setting of that name is ignored).
# Off: no request is one transaction; the flows open their own, commit before every upstream
# call, and the blocks that must be outermost say so with `transaction.atomic(durable=True)`.
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
