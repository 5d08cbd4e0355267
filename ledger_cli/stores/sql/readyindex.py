"""The ready index of the SQL stores (SPEC §6.1): side tables kept by triggers.

Two tables beside the Go schema (which stays as it is), named `ledger_*`:

- `ledger_needs (key, need)`: one row per need a task names (the edges of the
  dependency graph, read from the `needs` JSON text), indexed both ways;
- `ledger_ready (key, created)`: the *candidates*, every pending or claimed
  task whose direct needs are all completed, with `created` the task's
  CreatedAt as sortable UTC text (`YYYY-MM-DDTHH:MM:SS.nnnnnnnnn`), indexed by
  (created, key): the Ready order.

Triggers on `ledger_tasks` keep both current on every INSERT, UPDATE and
DELETE — including rows the Go service writes with plain SQL — and promote a
task's dependents when it completes. `claim --next` then reads the first
candidates in order and applies the rest of the Ready rule (an unexpired
lease, the transitive walk) to those few rows only. The tables are derived:
`ledger doctor` compares them with what the triggers would compute, and
`doctor --fix` rebuilds them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState

Fetch = Callable[[str, str, int], Sequence[Sequence[Any]]]

LIVE = "('pending', 'claimed')"


# -- SQLite ----------------------------------------------------------------------


def _sqlite_sortkey(x: str) -> str:
    """SQL (built-in functions only: the Go service's connection runs it too)
    turning RFC3339Nano text into sortable UTC text; '' stays '' (the zero time)."""
    tz = f"CASE WHEN substr({x}, -1) = 'Z' THEN 'Z' ELSE substr({x}, -6) END"
    tzlen = f"CASE WHEN substr({x}, -1) = 'Z' THEN 1 ELSE 6 END"
    frac = (
        f"CASE WHEN instr({x}, '.') = 0 THEN '' ELSE "
        f"substr({x}, instr({x}, '.') + 1, length({x}) - instr({x}, '.') - {tzlen}) END"
    )
    return (
        f"CASE WHEN {x} = '' THEN '' ELSE coalesce("
        f"strftime('%Y-%m-%dT%H:%M:%S', substr({x}, 1, 19) || {tz})"
        f" || '.' || substr({frac} || '000000000', 1, 9), {x}) END"
    )


def _sqlite_needs(x: str) -> str:
    return (
        f"json_each(CASE WHEN json_valid({x}) AND json_type({x}) = 'array' THEN {x} ELSE '[]' END)"
    )


def _sqlite_unmet(k: str) -> str:
    return (
        "EXISTS (SELECT 1 FROM ledger_needs n LEFT JOIN ledger_tasks d ON d.key = n.need"
        f" WHERE n.key = {k} AND d.status IS NOT 'completed')"
    )


SQLITE_OBJECTS = (
    "ledger_pruned",
    "ledger_needs",
    "ledger_needs_need",
    "ledger_ready",
    "ledger_ready_order",
    "ledger_ready_insert",
    "ledger_ready_update",
    "ledger_ready_delete",
)

_SQ_PROMOTE = (
    "INSERT OR REPLACE INTO ledger_ready (key, created)"
    f" SELECT t.key, {_sqlite_sortkey('t.created_at')}"
    " FROM ledger_needs n JOIN ledger_tasks t ON t.key = n.key"
    f" WHERE n.need = NEW.key AND t.status IN {LIVE} AND NOT {_sqlite_unmet('t.key')}"
)

SQLITE_TABLES = (
    # The keys `ledger prune` pruned (SPEC §6.4): a side table, so the mark
    # survives whatever the Go service does to ledger_tasks.
    "CREATE TABLE IF NOT EXISTS ledger_pruned (key TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS ledger_needs (key TEXT NOT NULL, need TEXT NOT NULL,"
    " PRIMARY KEY (key, need)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS ledger_needs_need ON ledger_needs (need)",
    "CREATE TABLE IF NOT EXISTS ledger_ready (key TEXT PRIMARY KEY, created TEXT NOT NULL)"
    " WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS ledger_ready_order ON ledger_ready (created, key)",
)

SQLITE_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS ledger_ready_insert AFTER INSERT ON ledger_tasks BEGIN"
    " INSERT OR IGNORE INTO ledger_needs (key, need)"
    f"  SELECT NEW.key, value FROM {_sqlite_needs('NEW.needs')} WHERE type = 'text';"
    " INSERT OR REPLACE INTO ledger_ready (key, created)"
    f"  SELECT NEW.key, {_sqlite_sortkey('NEW.created_at')}"
    f"  WHERE NEW.status IN {LIVE} AND NOT {_sqlite_unmet('NEW.key')};"
    f" {_SQ_PROMOTE} AND NEW.status = 'completed';"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_ready_update AFTER UPDATE ON ledger_tasks BEGIN"
    " DELETE FROM ledger_needs WHERE key = OLD.key"
    "  AND (NEW.needs IS NOT OLD.needs OR NEW.key IS NOT OLD.key);"
    " INSERT OR IGNORE INTO ledger_needs (key, need)"
    f"  SELECT NEW.key, value FROM {_sqlite_needs('NEW.needs')} WHERE type = 'text'"
    "  AND (NEW.needs IS NOT OLD.needs OR NEW.key IS NOT OLD.key);"
    " DELETE FROM ledger_ready WHERE key = OLD.key AND (OLD.key IS NOT NEW.key"
    f"  OR NEW.status NOT IN {LIVE} OR {_sqlite_unmet('NEW.key')});"
    " INSERT OR REPLACE INTO ledger_ready (key, created)"
    f"  SELECT NEW.key, {_sqlite_sortkey('NEW.created_at')}"
    f"  WHERE NEW.status IN {LIVE} AND NOT {_sqlite_unmet('NEW.key')}"
    "  AND NOT EXISTS (SELECT 1 FROM ledger_ready r WHERE r.key = NEW.key"
    f"   AND r.created = {_sqlite_sortkey('NEW.created_at')});"
    f" {_SQ_PROMOTE} AND NEW.status = 'completed' AND OLD.status IS NOT 'completed';"
    " DELETE FROM ledger_ready WHERE OLD.status = 'completed'"
    "  AND NEW.status IS NOT 'completed'"
    "  AND key IN (SELECT key FROM ledger_needs WHERE need = OLD.key);"
    " END",
    "CREATE TRIGGER IF NOT EXISTS ledger_ready_delete AFTER DELETE ON ledger_tasks BEGIN"
    " DELETE FROM ledger_needs WHERE key = OLD.key;"
    " DELETE FROM ledger_ready WHERE key = OLD.key"
    "  OR key IN (SELECT key FROM ledger_needs WHERE need = OLD.key);"
    " END",
)

SQLITE_REBUILD = (
    "DELETE FROM ledger_ready",
    "DELETE FROM ledger_needs",
    "INSERT OR IGNORE INTO ledger_needs (key, need) SELECT t.key, j.value"
    f" FROM ledger_tasks t, {_sqlite_needs('t.needs')} j WHERE j.type = 'text'",
    f"INSERT INTO ledger_ready (key, created) SELECT t.key, {_sqlite_sortkey('t.created_at')}"
    f" FROM ledger_tasks t WHERE t.status IN {LIVE} AND NOT {_sqlite_unmet('t.key')}",
)

SQLITE_CHECKS = (
    (
        "a need missing from ledger_needs",
        "SELECT t.key FROM ledger_tasks t, "
        f"{_sqlite_needs('t.needs')} j WHERE j.type = 'text' AND NOT EXISTS"
        " (SELECT 1 FROM ledger_needs n WHERE n.key = t.key AND n.need = j.value)",
    ),
    (
        "a need ledger_needs holds that the task does not name",
        "SELECT n.key FROM ledger_needs n WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t, "
        f"{_sqlite_needs('t.needs')} j WHERE t.key = n.key AND j.type = 'text'"
        " AND j.value = n.need)",
    ),
    (
        "a candidate missing from ledger_ready",
        f"SELECT t.key FROM ledger_tasks t WHERE t.status IN {LIVE}"
        f" AND NOT {_sqlite_unmet('t.key')} AND NOT EXISTS (SELECT 1 FROM ledger_ready r"
        f" WHERE r.key = t.key AND r.created = {_sqlite_sortkey('t.created_at')})",
    ),
    (
        "a ledger_ready row that is no candidate",
        "SELECT r.key FROM ledger_ready r WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t"
        f" WHERE t.key = r.key AND t.status IN {LIVE} AND NOT {_sqlite_unmet('t.key')})",
    ),
)


_NAMES_NEEDS = "EXISTS (SELECT 1 FROM ledger_needs n WHERE n.key = r.key)"
FREE = f"t.status = 'pending' AND NOT {_NAMES_NEEDS}"
"""A pending candidate that names no needs: ready, whatever else is in the store."""
NOT_FREE = f"(t.status <> 'pending' OR {_NAMES_NEEDS})"
"""Every other candidate: claimed, or naming needs (the Ready rule judges it)."""


def page_sql(
    columns: str,
    mark: str,
    lease: str,
    *,
    lock: bool,
    limit: int | None = None,
    only: str | None = None,
) -> str:
    """The next candidates after (created, key), in order, leaving out claimed
    rows whose lease (`lease`: the sortable lease_until expression) runs past
    `now`; `lock`: PostgreSQL's FOR UPDATE SKIP LOCKED (one row, held to the end
    of the transaction). Parameters: created, key, now (`sortable`), and the
    limit unless `limit` gives it as a literal (PostgreSQL then keeps one
    generic plan for the prepared statement instead of planning each call:
    half the server's cost of the query, measured). `only`: a further
    condition on the candidates (FREE or NOT_FREE)."""
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    which = "" if only is None else f" AND {only}"
    sql = (
        f"SELECT {cols}, r.created FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
        f" WHERE (r.created, r.key) > ({mark}, {mark})"
        f" AND (t.status = 'pending' OR {lease} <= {mark}){which}"
        f" ORDER BY r.created, r.key LIMIT {mark if limit is None else int(limit)}"
    )
    return sql + " FOR UPDATE OF t SKIP LOCKED" if lock else sql


FREE_COUNT = (
    f"SELECT count(*) FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key WHERE {FREE}"
)
"""How many FREE candidates there are: each one is ready (`ledger stats`)."""


PG_CLOCK = (
    "SELECT clock, to_char(clock AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '000'"
    " AS cut FROM (SELECT clock_timestamp() AS clock) x"
)
"""The server's clock and, as `cut`, the same instant as `sortable` writes it."""


def clocked_page_sql(columns: str, lease: str) -> str:
    """PostgreSQL's first candidate (`page_sql` locking, one row, from the
    start) judged by the server's own clock: the lease cut-off is
    `clock_timestamp()`, read once (a materialized CTE), and that instant is
    returned as the row's last column (after `created`). No parameters. The
    clock is read only when a row needs it: no row, no instant."""
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    return (
        f"WITH c AS MATERIALIZED ({PG_CLOCK})"
        f" SELECT {cols}, r.created, (SELECT clock FROM c)"
        " FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
        " WHERE (r.created, r.key) > ('', '')"
        f" AND (t.status = 'pending' OR {lease} <= (SELECT cut FROM c))"
        " ORDER BY r.created, r.key LIMIT 1 FOR UPDATE OF t SKIP LOCKED"
    )


SQLITE_LEASE = _sqlite_sortkey("t.lease_until")
PG_LEASE = "ledger_sortkey(t.lease_until)"
NEVER = "9999-12-31T23:59:59.999999999"


def sortable(now: Instant | None) -> str:
    """`now` as the sortable UTC text the index compares (NEVER for None: every
    claimed candidate counts)."""
    if now is None:
        return NEVER
    secs, ns = divmod(now.unix_ns, 1_000_000_000)
    when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=secs)
    return f"{when.year:04d}-{when:%m-%dT%H:%M:%S}.{ns:09d}"


# -- PostgreSQL ------------------------------------------------------------------

PG_SYNC_VERSION = "ledger_ready_sync v2"
"""Named in the trigger function's body: `PostgresStore` runs PG_DDL again over
an older one (v1 kept the index on claims and renewals too, planned the
promotion of dependents on every completion, and left ledger_ready's
autovacuum at the default)."""

PG_OBJECTS = ("ledger_needs", "ledger_ready", "ledger_ready_order", "ledger_needs_need")

PG_DDL = (
    'CREATE TABLE IF NOT EXISTS ledger_pruned (key text COLLATE "C" PRIMARY KEY)',
    'CREATE TABLE IF NOT EXISTS ledger_needs (key text COLLATE "C" NOT NULL,'
    ' need text COLLATE "C" NOT NULL, PRIMARY KEY (key, need))',
    "CREATE INDEX IF NOT EXISTS ledger_needs_need ON ledger_needs (need)",
    'CREATE TABLE IF NOT EXISTS ledger_ready (key text COLLATE "C" PRIMARY KEY,'
    ' created text COLLATE "C" NOT NULL)',
    "CREATE INDEX IF NOT EXISTS ledger_ready_order ON ledger_ready (created, key)",
    # Every completion deletes a row at the head of ledger_ready_order; until
    # VACUUM removes them, each claim steps over those dead entries (0.6 ms per
    # claim after 6,000 completions, measured). Vacuum it after every 1,000
    # deleted rows rather than the default 20% of the table.
    "ALTER TABLE ledger_ready SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 1000)",
    """CREATE OR REPLACE FUNCTION ledger_sortkey(x text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE tz text; frac text; dot int;
BEGIN
  IF x = '' THEN RETURN ''; END IF;
  IF right(x, 1) = 'Z' THEN tz := 'Z'; ELSE tz := right(x, 6); END IF;
  dot := strpos(x, '.');
  IF dot = 0 THEN frac := ''; ELSE frac := substr(x, dot + 1, length(x) - dot - length(tz)); END IF;
  RETURN to_char((substr(x, 1, 19) || tz)::timestamptz AT TIME ZONE 'UTC',
                 'YYYY-MM-DD"T"HH24:MI:SS') || '.' || rpad(frac, 9, '0');
EXCEPTION WHEN others THEN RETURN x;
END $$""",
    """CREATE OR REPLACE FUNCTION ledger_needs_of(x text) RETURNS SETOF text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE v jsonb;
BEGIN
  BEGIN v := x::jsonb; EXCEPTION WHEN others THEN RETURN; END;
  IF jsonb_typeof(v) <> 'array' THEN RETURN; END IF;
  RETURN QUERY SELECT DISTINCT e #>> '{}' FROM jsonb_array_elements(v) e
    WHERE jsonb_typeof(e) = 'string';
END $$""",
    """CREATE OR REPLACE FUNCTION ledger_unmet(k text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT 1 FROM ledger_needs n LEFT JOIN ledger_tasks d ON d.key = n.need
                 WHERE n.key = k AND d.status IS DISTINCT FROM 'completed')
$$""",
    f"""CREATE OR REPLACE FUNCTION ledger_ready_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
-- {PG_SYNC_VERSION}
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM ledger_needs WHERE key = OLD.key;
    DELETE FROM ledger_ready WHERE key = OLD.key
      OR key IN (SELECT key FROM ledger_needs WHERE need = OLD.key);
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.status IN {LIVE} AND NEW.status IN {LIVE}
     AND NEW.key = OLD.key AND NEW.needs IS NOT DISTINCT FROM OLD.needs
     AND NEW.created_at IS NOT DISTINCT FROM OLD.created_at THEN
    RETURN NULL;  -- a claim, renewal, release or takeover: nothing the index holds changed
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.needs IS DISTINCT FROM OLD.needs THEN
    DELETE FROM ledger_needs WHERE key = OLD.key;
  END IF;
  IF TG_OP = 'INSERT' OR NEW.needs IS DISTINCT FROM OLD.needs THEN
    INSERT INTO ledger_needs (key, need) SELECT NEW.key, n FROM ledger_needs_of(NEW.needs) n
      ON CONFLICT DO NOTHING;
    -- a need completing concurrently: wait for it, then judge (no write skew)
    PERFORM 1 FROM ledger_tasks WHERE key IN (SELECT n FROM ledger_needs_of(NEW.needs) n)
      ORDER BY key FOR SHARE;
  END IF;
  IF NEW.status IN {LIVE} AND NOT ledger_unmet(NEW.key) THEN
    INSERT INTO ledger_ready (key, created) VALUES (NEW.key, ledger_sortkey(NEW.created_at))
      ON CONFLICT (key) DO UPDATE SET created = EXCLUDED.created
      WHERE ledger_ready.created IS DISTINCT FROM EXCLUDED.created;
  ELSIF TG_OP = 'UPDATE' THEN
    DELETE FROM ledger_ready WHERE key = NEW.key;
  END IF;
  IF NEW.status = 'completed' AND (TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM 'completed')
  THEN
    -- (most tasks have no dependents: skip the promotion, costly to plan each time)
    IF EXISTS (SELECT 1 FROM ledger_needs WHERE need = NEW.key) THEN
      -- two needs of one task completing at once: the second waits for the first
      PERFORM 1 FROM ledger_tasks WHERE key IN (SELECT key FROM ledger_needs WHERE need = NEW.key)
        ORDER BY key FOR UPDATE;
      INSERT INTO ledger_ready (key, created)
        SELECT t.key, ledger_sortkey(t.created_at) FROM ledger_needs n
        JOIN ledger_tasks t ON t.key = n.key
        WHERE n.need = NEW.key AND t.status IN {LIVE} AND NOT ledger_unmet(t.key)
        ON CONFLICT (key) DO NOTHING;
    END IF;
  ELSIF TG_OP = 'UPDATE' AND OLD.status = 'completed' AND NEW.status <> 'completed' THEN
    DELETE FROM ledger_ready WHERE key IN (SELECT key FROM ledger_needs WHERE need = NEW.key);
  END IF;
  RETURN NULL;
END $$""",
    "DROP TRIGGER IF EXISTS ledger_ready_sync ON ledger_tasks",
    "CREATE TRIGGER ledger_ready_sync AFTER INSERT OR UPDATE OR DELETE ON ledger_tasks"
    " FOR EACH ROW EXECUTE FUNCTION ledger_ready_sync()",
)

PG_REBUILD = (
    "DELETE FROM ledger_ready",
    "DELETE FROM ledger_needs",
    "INSERT INTO ledger_needs (key, need) SELECT t.key, n FROM ledger_tasks t,"
    " ledger_needs_of(t.needs) n ON CONFLICT DO NOTHING",
    "INSERT INTO ledger_ready (key, created) SELECT t.key, ledger_sortkey(t.created_at)"
    f" FROM ledger_tasks t WHERE t.status IN {LIVE} AND NOT ledger_unmet(t.key)",
)

PG_CHECKS = (
    (
        "a need missing from ledger_needs",
        "SELECT t.key FROM ledger_tasks t, ledger_needs_of(t.needs) j WHERE NOT EXISTS"
        " (SELECT 1 FROM ledger_needs n WHERE n.key = t.key AND n.need = j)",
    ),
    (
        "a need ledger_needs holds that the task does not name",
        "SELECT n.key FROM ledger_needs n WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t,"
        " ledger_needs_of(t.needs) j WHERE t.key = n.key AND j = n.need)",
    ),
    (
        "a candidate missing from ledger_ready",
        f"SELECT t.key FROM ledger_tasks t WHERE t.status IN {LIVE}"
        " AND NOT ledger_unmet(t.key) AND NOT EXISTS (SELECT 1 FROM ledger_ready r"
        " WHERE r.key = t.key AND r.created = ledger_sortkey(t.created_at))",
    ),
    (
        "a ledger_ready row that is no candidate",
        "SELECT r.key FROM ledger_ready r WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t"
        f" WHERE t.key = r.key AND t.status IN {LIVE} AND NOT ledger_unmet(t.key))",
    ),
)


# -- reading -----------------------------------------------------------------------


def candidates(fetch: Fetch, page: int, after: tuple[str, str] = ("", "")) -> Iterator[TaskState]:
    """The candidates in Ready order after `after` (created, key), read `page`
    rows at a time by keyset (`fetch(created, key, limit)` runs the page query
    under the store's lock). Keys are never empty: nothing sorts at or before
    the default, the start."""
    from ledger_cli.stores.sql.codec import row_to_state

    while True:
        rows = fetch(after[0], after[1], page)
        for row in rows:
            yield row_to_state(row[:-1])
        if len(rows) < page:
            return
        after = (str(rows[-1][-1]), str(rows[-1][0]))


# -- prune (SPEC §6.4) ---------------------------------------------------------


STATUS_COUNTS_SQL = (
    "SELECT t.status, count(*) FROM ledger_tasks t WHERE NOT EXISTS"
    " (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) GROUP BY t.status"
)
"""Unpruned records by status (`ledger stats`), counted by the database."""


def visible_sql(columns: str) -> str:
    return (
        f"SELECT {columns} FROM ledger_tasks t WHERE NOT EXISTS"
        " (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) ORDER BY t.key"
    )


def pruned_sql(columns: str) -> str:
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    return f"SELECT {cols} FROM ledger_tasks t JOIN ledger_pruned p ON p.key = t.key ORDER BY t.key"


def visible_page_sql(columns: str, mark: str) -> str:
    """The next page of unpruned records after a key, in key order."""
    return (
        f"SELECT {columns} FROM ledger_tasks t WHERE t.key > {mark} AND NOT EXISTS"
        f" (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) ORDER BY t.key LIMIT {mark}"
    )
