"""The PostgreSQL store's schema and its set-up on open (docs/design.md §3.4, §6.1, §8.2).

The DDL of `ledger_tasks` (the Go table on PostgreSQL: `text COLLATE "C"`
keys, `numeric(20,0)` unsigned 64-bit numbers), our history, pause,
schedule, queue, limit and revoked-lease tables, and `setup`: one round trip
to check the schema is complete (SCHEMA_CHECK) and, only when it is not, the
DDL under an advisory lock (SETUP_LOCK) that serialises concurrent openers,
building the ready index and the Ready order the first time and replacing an
older trigger function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger_cli.stores.sql import codec, ddl, postgres_index

if TYPE_CHECKING:
    import psycopg

_UINT = "numeric(20,0) NOT NULL DEFAULT 0 CHECK ({col} BETWEEN 0 AND 18446744073709551615)"

DDL: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS ledger_tasks ("
    ' key text COLLATE "C" PRIMARY KEY,'
    " status text NOT NULL,"
    f" sequence {_UINT.format(col='sequence')},"
    " owner text NOT NULL DEFAULT '',"
    f" fence {_UINT.format(col='fence')},"
    " lease_until text NOT NULL DEFAULT '',"
    " needs text NOT NULL DEFAULT '[]',"
    " blocked_by text NOT NULL DEFAULT '',"
    " task bytea,"
    f" rev {_UINT.format(col='rev')},"
    " created_at text NOT NULL DEFAULT '',"
    " updated_at text NOT NULL DEFAULT '',"
    " created_by text NOT NULL DEFAULT '',"
    " updated_by text NOT NULL DEFAULT '')",
    *(
        f"ALTER TABLE ledger_tasks ADD COLUMN IF NOT EXISTS {col} text NOT NULL DEFAULT ''"
        for col in codec.MIGRATED_COLUMNS
    ),
    "CREATE INDEX IF NOT EXISTS ledger_tasks_claimable"
    ' ON ledger_tasks (status, created_at COLLATE "C", key)',
    *ddl.history(ddl.PG),
    *ddl.pause(ddl.PG),
    *ddl.schedule(ddl.PG),
    *ddl.queues(ddl.PG),
)


def _rel(name: str) -> str:
    """The relation `name` of the current schema (NULL when there is none)."""
    return f"to_regclass(quote_ident(current_schema()) || '.{name}')"


def _trigger(name: str, table: str) -> str:
    return f"EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = '{name}' AND tgrelid = {_rel(table)})"


def _function(name: str) -> str:
    """The function `name` of the current schema, its body naming a version
    (a parameter)."""
    return (
        f"EXISTS (SELECT 1 FROM pg_proc WHERE proname = '{name}'"
        " AND pronamespace = to_regnamespace(quote_ident(current_schema()))"
        " AND strpos(prosrc, %s) > 0)"
    )


_RELATIONS = (
    "ledger_tasks_claimable",
    "ledger_history",
    "ledger_history_key",
    "ledger_pause",
    "ledger_schedule",
    "ledger_queue",
    "ledger_queue_by_queue",
    "ledger_limit",
    "ledger_revoked",
    "ledger_due",
)
SCHEMA_CHECK = (
    f"SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = {_rel('ledger_tasks')}"
    " AND attnum > 0 AND NOT attisdropped AND attname = ANY(%s)), "
    + ", ".join(f"{_rel(name)} IS NOT NULL" for name in _RELATIONS)
    + f", {_function('ledger_due_sync')}, {_trigger('ledger_ready_sync', 'ledger_tasks')}"
    + f", {_function('ledger_ready_sync')}"
)
"""One round trip on open: every Go column, the indexes, the history table, the
ready index's trigger (docs/design.md §6.1) and its function's version. When all are
there, no DDL runs."""

_READY_INSTALLED = f"SELECT {_trigger('ledger_ready_sync', 'ledger_tasks')}"
_DUE_INSTALLED = (
    f"SELECT {_rel('ledger_due')} IS NOT NULL"
    f" AND {_trigger('ledger_due_schedule', 'ledger_schedule')} AND {_function('ledger_due_sync')}"
)

SETUP_LOCK = 0x6C6564676572  # pg_advisory_xact_lock key ("ledger"): openers serialise DDL


def setup(conn: psycopg.Connection[Any]) -> None:
    """Bring the schema of `conn`'s search_path up to date (no DDL when it is)."""
    args = (
        list(codec.ALL_COLUMNS),
        postgres_index.DUE_VERSION,
        postgres_index.PG_SYNC_VERSION,
    )
    row = conn.execute(SCHEMA_CHECK, args).fetchone()
    if row is not None and row[0] == len(codec.ALL_COLUMNS) and all(row[1:]):
        return  # up to date: no DDL, no lock
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
        for stmt in DDL:
            conn.execute(stmt)
        ready = conn.execute(_READY_INSTALLED).fetchone()
        if not (ready and ready[0]):  # the ready index (docs/design.md §6.1), built once
            for stmt in (*postgres_index.READY_DDL, *postgres_index.READY_REBUILD):
                conn.execute(stmt)
        else:  # an older trigger function: replace it (the index stays)
            for stmt in postgres_index.READY_DDL:
                conn.execute(stmt)
        # The Ready order of docs/design.md §8.2 (stores/sql/postgres_index.py): built by the
        # first opener that finds it missing or older, then kept by its triggers.
        row = conn.execute(_DUE_INSTALLED, (postgres_index.DUE_VERSION,)).fetchone()
        for stmt in postgres_index.DUE_DDL:
            conn.execute(stmt)
        if row is None or not row[0]:
            for sql in postgres_index.DUE_REBUILD:
                conn.execute(sql)
