"""Shared helpers for the SQL store tests: where PostgreSQL is, fresh schemas,
a fast directory for SQLite files.

PostgreSQL is found through `LEDGER_TEST_POSTGRES_URL` (default: the local
server `.ci/postgres.sh` sets up). When it cannot be reached the PostgreSQL
tests are skipped with the reason, unless `CI` is set, in which case they fail.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Iterator

import pytest

DEFAULT_POSTGRES_URL = "postgresql://ledger:ledger@127.0.0.1:5432/ledger_test"


def postgres_url() -> str:
    return os.environ.get("LEDGER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@functools.cache
def _postgres_problem() -> str | None:
    """None when the test server answers; otherwise why not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'ledger_cli[postgres]')"
    try:
        with psycopg.connect(postgres_url(), connect_timeout=3, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"PostgreSQL is not reachable at {postgres_url()}: {first}"
    return None


POSTGRES_HINT = "start it with `bash .ci/postgres.sh`, or set LEDGER_TEST_POSTGRES_URL"


def postgres_skip_reason() -> str | None:
    """Why the PostgreSQL tests skip (the problem and how to fix it); None when they run."""
    problem = _postgres_problem()
    return None if problem is None else f"{problem} ({POSTGRES_HINT})"


def require_postgres() -> str:
    """The test server's URL; skip (or, under CI, fail) when it is not reachable."""
    reason = postgres_skip_reason()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI is set and {reason}", pytrace=False)
        pytest.skip(reason)
    return postgres_url()


def schema_conninfo(schema: str, durable: bool = True) -> str:
    """A libpq connection string for the test server with `search_path` = schema.

    `durable=False` adds `synchronous_commit=off` (commits do not wait for the
    WAL flush) for tests of SQL behaviour that make thousands of commits.
    """
    from psycopg.conninfo import make_conninfo

    options = f"-c search_path={schema}"
    if not durable:
        options += " -c synchronous_commit=off"
    return make_conninfo(postgres_url(), options=options)


@contextlib.contextmanager
def fresh_schema(prefix: str = "ledger_t", durable: bool = True) -> Iterator[str]:
    """Create an empty schema on the test server; yield a conninfo using it; drop it."""
    import psycopg

    url = require_postgres()
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema_conninfo(schema, durable)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


HOSTILE_TEXTS: tuple[str, ...] = (
    "'; DROP TABLE ledger_tasks;--",
    '"; DROP TABLE ledger_history; --',
    "x' OR '1'='1",
    "') ON CONFLICT DO NOTHING; DELETE FROM ledger_tasks; --",
    "%s %(key)s $1 ? :name @p",
    "back\\slash \\' \\\" ",
    "new\nline\ttab\r",
    "ünïcødé ✓ 𝄞 <>&",
    "*/ /* -- #",
)
"""Keys, owners, actors and payload strings that would break string-built SQL."""


def waiting_on_a_lock(url: str, application: str) -> bool:
    """Whether a session named `application` (its `application_name`) waits on
    a lock: how a staged race knows the second writer reached the row."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = %s AND wait_event_type = 'Lock'",
            (application,),
        ).fetchone()
    return row is not None and row[0] > 0
