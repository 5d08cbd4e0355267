"""The SQLite store's schema: the Go table, ours beside it, and the migration.

GO_DDL is the Go `SQLiteStore`'s `ledger_tasks` (docs/design.md §3.3), column
for column; EXTRA_DDL our claimable-work index, history, pause and schedule
tables. `schema_complete` checks (reads only) that every column and object is
there, and `migrate` runs the Go store's create-and-migrate plus ours, and
builds the ready index and the Ready order the first time, in one BEGIN
IMMEDIATE transaction so concurrent openers (a Go service too) serialise.
"""

from __future__ import annotations

import contextlib
import sqlite3

from ledger_cli.errors import StoreError
from ledger_cli.stores.sql import codec, ddl, sqlite_index

GO_DDL = """CREATE TABLE IF NOT EXISTS ledger_tasks (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until TEXT NOT NULL DEFAULT '',
    needs TEXT NOT NULL DEFAULT '[]',
    blocked_by TEXT NOT NULL DEFAULT '',
    task BLOB,
    rev INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    updated_by TEXT NOT NULL DEFAULT ''
)"""
"""The Go store's table (docs/design.md §3.3), column for column."""

EXTRA_DDL = (
    "CREATE INDEX IF NOT EXISTS ledger_tasks_claimable ON ledger_tasks (status, created_at, key)",
    *ddl.history(ddl.SQLITE),
    *ddl.pause(ddl.SQLITE),
    *ddl.schedule(ddl.SQLITE),
)


def schema_complete(conn: sqlite3.Connection) -> bool:
    cols = {row[1] for row in conn.execute("PRAGMA table_info(ledger_tasks)")}
    if not set(codec.ALL_COLUMNS) <= cols:
        return False
    return _installed(conn, (*ddl.created(EXTRA_DDL), *sqlite_index.OBJECTS))


def _installed(conn: sqlite3.Connection, names: tuple[str, ...]) -> bool:
    """Every one of `names` (tables, indexes, triggers) is in the schema."""
    marks = ", ".join("?" for _ in names)
    found = conn.execute(
        f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", names
    ).fetchone()[0]
    return bool(found == len(names))


def migrate(conn: sqlite3.Connection, path: str) -> None:
    """The Go store's create-and-migrate, plus our index and history table.

    All in one BEGIN IMMEDIATE transaction, so concurrent openers (and a Go
    service migrating at the same time) serialise; every step is idempotent.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(GO_DDL)
        cols = {row[1] for row in conn.execute("PRAGMA table_info(ledger_tasks)")}
        for name in codec.MIGRATED_COLUMNS:
            if name not in cols:
                conn.execute(f"ALTER TABLE ledger_tasks ADD COLUMN {name} TEXT NOT NULL DEFAULT ''")
                cols.add(name)
        missing = [c for c in codec.ALL_COLUMNS if c not in cols]
        if missing:
            raise StoreError(
                f"ledger: sqlite store {path}: table ledger_tasks lacks column(s) "
                f"{', '.join(missing)}; this is not a ledger database"
            )
        for stmt in EXTRA_DDL:
            conn.execute(stmt)
        if not _installed(conn, sqlite_index.OBJECTS):  # the ready index, built once
            # (docs/design.md §6.1): a ledger_ready of an older release is rebuilt by
            # the first opener that migrates, ledger_due (§8.2) built if missing.
            due_missing = not _installed(conn, sqlite_index.DUE_OBJECTS)
            for stmt in (*sqlite_index.DDL, *sqlite_index.READY_REBUILD):
                conn.execute(stmt)
            if due_missing:
                for sql in sqlite_index.DUE_REBUILD:
                    conn.execute(sql)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
