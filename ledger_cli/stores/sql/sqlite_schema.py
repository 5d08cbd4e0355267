"""The SQLite store's schema: the Go table, ours beside it, and the migration.

GO_DDL is the Go `SQLiteStore`'s `ledger_tasks` (docs/design.md §3.3), column
for column; EXTRA_DDL our claimable-work index, history, pause and schedule
tables; INDEX_DDL the ready index's and the Ready order's tables (ddl.py) and
their triggers (docs/design.md §6.1, §8.2), written with built-in functions
only, since the Go service's connection fires them too. Three on
`ledger_tasks` keep `ledger_needs` and the candidates in `ledger_ready`;
three on `ledger_ready` (whatever wrote the task, the Go service included:
no schedule row means priority 0, due at CreatedAt) and three on
`ledger_schedule` (an admission's --priority/--not-before) keep the same keys
in the Ready order, `ledger_due`. Their rebuild and checks are
readyindex.py's (`derived`). `schema_complete` checks (reads only) that every
column and object is there, and `migrate` runs the Go store's
create-and-migrate plus ours, and builds the ready index and the Ready order
the first time (or an older release's index without `ledger_due`), in one
BEGIN IMMEDIATE transaction so concurrent openers (a Go service too) serialise.
"""

from __future__ import annotations

import contextlib
import sqlite3

from ledger_cli.engine.instant import Instant
from ledger_cli.errors import StoreError
from ledger_cli.stores.sql import codec, ddl, due
from ledger_cli.stores.sql.readyindex import LIVE, derived

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


T = ddl.SQLITE
_PROMOTE = (
    "INSERT OR REPLACE INTO ledger_ready (key, created)"
    f" SELECT t.key, {T.sortkey('t.created_at')}"
    " FROM ledger_needs n JOIN ledger_tasks t ON t.key = n.key"
    f" WHERE n.need = NEW.key AND t.status IN {LIVE} AND NOT {T.unmet('t.key')}"
)
_NB = T.sortkey("s.not_before")
_ROWS = due.rows_sql(T.later, _NB)


def _row_of(key: str, created: str) -> str:
    """SELECT of the ledger_due row of a candidate (key, created text)."""
    return (
        f"SELECT {key}, -coalesce(s.priority, 0), max({created}, coalesce({_NB}, ''))"
        f" FROM (SELECT 1) one LEFT JOIN ledger_schedule s ON s.key = {key}"
    )


SORTKEY_VERSION = "ledger sortkey v2"
"""Named in each trigger's text (sqlite_master): v1's sortable times read the
offset through strftime, which stops at ±14:59, and kept a text of a larger
offset as it was (the wrong instant). `migrate` replaces v1's triggers and
rebuilds the ready index and the Ready order."""

_INDEX_DDL = (
    # The Ready order's table first, so that it follows every ledger_ready row
    # a rebuild writes.
    *ddl.due(T),
    *ddl.ready(T),
    "CREATE TRIGGER IF NOT EXISTS ledger_ready_insert AFTER INSERT ON ledger_tasks BEGIN"
    " INSERT OR IGNORE INTO ledger_needs (key, need)"
    f"  SELECT NEW.key, value FROM {T.needs('NEW.needs')} WHERE type = 'text';"
    " INSERT OR REPLACE INTO ledger_ready (key, created)"
    f"  SELECT NEW.key, {T.sortkey('NEW.created_at')}"
    f"  WHERE NEW.status IN {LIVE} AND NOT {T.unmet('NEW.key')};"
    f" {_PROMOTE} AND NEW.status = 'completed';"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_ready_update AFTER UPDATE ON ledger_tasks BEGIN"
    " DELETE FROM ledger_needs WHERE key = OLD.key"
    "  AND (NEW.needs IS NOT OLD.needs OR NEW.key IS NOT OLD.key);"
    " INSERT OR IGNORE INTO ledger_needs (key, need)"
    f"  SELECT NEW.key, value FROM {T.needs('NEW.needs')} WHERE type = 'text'"
    "  AND (NEW.needs IS NOT OLD.needs OR NEW.key IS NOT OLD.key);"
    " DELETE FROM ledger_ready WHERE key = OLD.key AND (OLD.key IS NOT NEW.key"
    f"  OR NEW.status NOT IN {LIVE} OR {T.unmet('NEW.key')});"
    " INSERT OR REPLACE INTO ledger_ready (key, created)"
    f"  SELECT NEW.key, {T.sortkey('NEW.created_at')}"
    f"  WHERE NEW.status IN {LIVE} AND NOT {T.unmet('NEW.key')}"
    "  AND NOT EXISTS (SELECT 1 FROM ledger_ready r WHERE r.key = NEW.key"
    f"   AND r.created = {T.sortkey('NEW.created_at')});"
    f" {_PROMOTE} AND NEW.status = 'completed' AND OLD.status IS NOT 'completed';"
    " DELETE FROM ledger_ready WHERE OLD.status = 'completed'"
    "  AND NEW.status IS NOT 'completed'"
    "  AND key IN (SELECT key FROM ledger_needs WHERE need = OLD.key);"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_ready_delete AFTER DELETE ON ledger_tasks BEGIN"
    " DELETE FROM ledger_needs WHERE key = OLD.key;"
    " DELETE FROM ledger_ready WHERE key = OLD.key"
    "  OR key IN (SELECT key FROM ledger_needs WHERE need = OLD.key);"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_due_ready_insert AFTER INSERT ON ledger_ready BEGIN"
    f" INSERT OR REPLACE INTO ledger_due (key, rank, due) {_row_of('NEW.key', 'NEW.created')};"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_due_ready_update AFTER UPDATE ON ledger_ready BEGIN"
    " DELETE FROM ledger_due WHERE key = OLD.key;"
    f" INSERT OR REPLACE INTO ledger_due (key, rank, due) {_row_of('NEW.key', 'NEW.created')};"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_due_ready_delete AFTER DELETE ON ledger_ready BEGIN"
    " DELETE FROM ledger_due WHERE key = OLD.key;"
    " END",
    *(
        f"CREATE TRIGGER IF NOT EXISTS ledger_due_schedule_{event} AFTER {event.upper()}"
        f" ON ledger_schedule BEGIN"
        f" DELETE FROM ledger_due WHERE key = {row}.key;"
        f" INSERT OR REPLACE INTO ledger_due (key, rank, due) {_ROWS} WHERE r.key = {row}.key;"
        " END"
        for event, row in (("insert", "NEW"), ("update", "NEW"), ("delete", "OLD"))
    ),
)
INDEX_DDL = tuple(
    stmt.replace(" BEGIN ", f" BEGIN /* {SORTKEY_VERSION} */ ", 1)
    if stmt.startswith("CREATE TRIGGER")
    else stmt
    for stmt in _INDEX_DDL
)
"""The tables, indexes and triggers, in the order a migration makes them."""

OBJECTS = ddl.created(INDEX_DDL)
TRIGGERS = ddl.created(s for s in INDEX_DDL if s.startswith("CREATE TRIGGER"))
DUE_OBJECTS = tuple(name for name in OBJECTS if name.startswith("ledger_due"))
"""The Ready order's table, index and triggers (`ledger_due` first, then its index)."""
_ALL_OBJECTS = (*ddl.created(EXTRA_DDL), *OBJECTS)
REBUILD_RANGE, READY_REBUILD, DUE_REBUILD, CHECKS = derived(T)


def schema_complete(conn: sqlite3.Connection) -> bool:
    cols = {row[1] for row in conn.execute("PRAGMA table_info(ledger_tasks)")}
    if not set(codec.ALL_COLUMNS) <= cols:
        return False
    return _installed(conn, _ALL_OBJECTS, current=True)


def _installed(conn: sqlite3.Connection, names: tuple[str, ...], current: bool = False) -> bool:
    """Every one of `names` (tables, indexes, triggers) is in the schema;
    `current`: and each trigger among them is of this SORTKEY_VERSION (one
    query either way: an open asks it every time)."""
    marks = ", ".join("?" for _ in names)
    sql = f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})"
    args: tuple[str, ...] = names
    if current:
        sql += " AND (type <> 'trigger' OR instr(sql, ?) > 0)"
        args = (*names, SORTKEY_VERSION)
    found = conn.execute(sql, args).fetchone()[0]
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
        # Our tables are made together: ledger_pause without ledger_history
        # is a history dropped by hand, made again with a row saying so.
        dropped = _installed(conn, ("ledger_pause",)) and not _installed(conn, ("ledger_history",))
        for stmt in EXTRA_DDL:
            conn.execute(stmt)
        if dropped:
            conn.execute(*ddl.history_lost_row(str(Instant.now().utc())))
        if _installed(conn, OBJECTS) and not _installed(conn, TRIGGERS, current=True):
            # Triggers of an older SORTKEY_VERSION: replaced, and what they
            # derived rebuilt (below, as for a first build).
            for name in TRIGGERS:
                conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        if not _installed(conn, OBJECTS):  # the ready index, built once
            # (docs/design.md §6.1): a ledger_ready of an older release is rebuilt by
            # the first opener that migrates, ledger_due (§8.2) built if missing.
            due_missing = not _installed(conn, DUE_OBJECTS)
            for stmt in (*INDEX_DDL, *READY_REBUILD):
                conn.execute(stmt)
            if due_missing:
                for sql in DUE_REBUILD:
                    conn.execute(sql)
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
