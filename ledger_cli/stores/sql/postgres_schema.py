"""The PostgreSQL store's schema and its set-up on open (docs/design.md §3.4, §6.1, §8.2).

The DDL of `ledger_tasks` (the Go table on PostgreSQL: `text COLLATE "C"`
keys, `numeric(20,0)` unsigned 64-bit numbers), our history, pause,
schedule, queue, limit and revoked-lease tables; the ready index's and the
Ready order's tables (ddl.py), helper functions (`ledger_sortkey`,
`ledger_needs_of`, `ledger_unmet`) and trigger functions: `ledger_ready_sync`
on `ledger_tasks` keeps `ledger_needs` and the candidates in `ledger_ready`,
`ledger_due_sync` on `ledger_ready` and `ledger_schedule` keeps them in the
Ready order in `ledger_due` (a row the Go service writes: priority 0, due at
CreatedAt), each versioned (PG_SYNC_VERSION, DUE_VERSION) so that an opener
replaces an older one; their rebuild and checks are readyindex.py's
(`derived`). And `setup`: one round trip to check the schema is complete
(SCHEMA_CHECK) and, only when it is not, the DDL under an advisory lock
(SETUP_LOCK) that serialises concurrent openers, building the ready index
and the Ready order the first time and replacing an older trigger function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import codec, ddl
from ledger_cli.stores.sql.readyindex import LIVE, derived

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


PG_SYNC_VERSION = "ledger_ready_sync v2"
"""Named in the trigger function's body: `PostgresStore` runs READY_DDL again over
an older one (v1 kept the index on claims and renewals too, planned the
promotion of dependents on every completion, and left ledger_ready's
autovacuum at the default)."""
SORTKEY_VERSION = "ledger_sortkey v2"
"""Named in `ledger_sortkey`'s body: v1 gave offsets past ±15:59 to timestamptz,
which refuses them, and kept the text as it was (the wrong instant). An opener
that finds v1 replaces it and rebuilds the ready index and the Ready order."""

READY_DDL = (
    *ddl.ready(ddl.PG),
    # Every completion deletes a row at the head of ledger_ready_order; until
    # VACUUM removes them, each claim steps over those dead entries (0.6 ms per
    # claim after 6,000 completions, measured). Vacuum it after every 1,000
    # deleted rows rather than the default 20% of the table.
    "ALTER TABLE ledger_ready SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 1000)",
    f"""CREATE OR REPLACE FUNCTION ledger_sortkey(x text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
-- {SORTKEY_VERSION}: the offset taken off by arithmetic (timestamptz input stops at ±15:59)
DECLARE tz text; frac text; dot int; off interval := interval '0';
BEGIN
  IF x = '' THEN RETURN ''; END IF;
  IF right(x, 1) = 'Z' THEN tz := 'Z'; ELSE tz := right(x, 6); END IF;
  IF tz <> 'Z' THEN
    IF tz !~ '^[+-][0-9][0-9]:[0-9][0-9]$' THEN RETURN x; END IF;
    off := make_interval(hours => substr(tz, 2, 2)::int, mins => substr(tz, 5, 2)::int);
    IF left(tz, 1) = '-' THEN off := -off; END IF;
  END IF;
  dot := strpos(x, '.');
  IF dot = 0 THEN frac := ''; ELSE frac := substr(x, dot + 1, length(x) - dot - length(tz)); END IF;
  RETURN to_char(substr(x, 1, 19)::timestamp - off,
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

DUE_VERSION = "ledger_due_sync v1"

DUE_DDL = (
    *ddl.due(ddl.PG),
    "ALTER TABLE ledger_due SET (autovacuum_vacuum_scale_factor = 0,"
    " autovacuum_vacuum_threshold = 1000)",
    f"""CREATE OR REPLACE FUNCTION ledger_due_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
-- {DUE_VERSION}
DECLARE k text;
BEGIN
  IF TG_TABLE_NAME = 'ledger_ready' THEN
    IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.key <> NEW.key) THEN
      DELETE FROM ledger_due WHERE key = OLD.key;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN NULL; END IF;
    INSERT INTO ledger_due (key, rank, due)
      SELECT NEW.key, -coalesce(s.priority, 0),
             greatest(NEW.created, coalesce(ledger_sortkey(s.not_before), ''))
      FROM (SELECT 1) one LEFT JOIN ledger_schedule s ON s.key = NEW.key
      ON CONFLICT (key) DO UPDATE SET rank = EXCLUDED.rank, due = EXCLUDED.due;
    RETURN NULL;
  END IF;
  IF TG_OP = 'DELETE' THEN k := OLD.key; ELSE k := NEW.key; END IF;
  UPDATE ledger_due d SET rank = -coalesce(s.priority, 0),
         due = greatest(r.created, coalesce(ledger_sortkey(s.not_before), ''))
    FROM ledger_ready r LEFT JOIN ledger_schedule s ON s.key = r.key
    WHERE r.key = k AND d.key = k;
  RETURN NULL;
END $$""",
    "DROP TRIGGER IF EXISTS ledger_due_ready ON ledger_ready",
    "CREATE TRIGGER ledger_due_ready AFTER INSERT OR UPDATE OR DELETE ON ledger_ready"
    " FOR EACH ROW EXECUTE FUNCTION ledger_due_sync()",
    "DROP TRIGGER IF EXISTS ledger_due_schedule ON ledger_schedule",
    "CREATE TRIGGER ledger_due_schedule AFTER INSERT OR UPDATE OR DELETE ON ledger_schedule"
    " FOR EACH ROW EXECUTE FUNCTION ledger_due_sync()",
)

REBUILD_RANGE, READY_REBUILD, DUE_REBUILD, CHECKS = derived(ddl.PG)


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


_RELATIONS = (*ddl.created(DDL[1:]), "ledger_due")
"""Our tables and indexes (DDL, after `ledger_tasks`) and the Ready order's table."""
SCHEMA_CHECK = (
    f"SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = {_rel('ledger_tasks')}"
    " AND attnum > 0 AND NOT attisdropped AND attname = ANY(%s)), "
    + ", ".join(f"{_rel(name)} IS NOT NULL" for name in _RELATIONS)
    + f", {_function('ledger_due_sync')}, {_trigger('ledger_ready_sync', 'ledger_tasks')}"
    + f", {_function('ledger_ready_sync')}, {_function('ledger_sortkey')}"
)
"""One round trip on open: every Go column, the indexes, the history table, the
ready index's trigger (docs/design.md §6.1) and its function's version. When all are
there, no DDL runs."""

_READY_INSTALLED = f"SELECT {_trigger('ledger_ready_sync', 'ledger_tasks')}"
_DUE_INSTALLED = (
    f"SELECT {_rel('ledger_due')} IS NOT NULL"
    f" AND {_trigger('ledger_due_schedule', 'ledger_schedule')} AND {_function('ledger_due_sync')}"
)

_HISTORY_DROPPED = f"SELECT {_rel('ledger_pause')} IS NOT NULL AND {_rel('ledger_history')} IS NULL"
SETUP_LOCK = 0x6C6564676572  # pg_advisory_xact_lock key ("ledger"): openers serialise DDL


def setup(conn: psycopg.Connection[Any]) -> None:
    """Bring the schema of `conn`'s search_path up to date (no DDL when it is)."""
    args = (
        list(codec.ALL_COLUMNS),
        DUE_VERSION,
        PG_SYNC_VERSION,
        SORTKEY_VERSION,
    )
    row = conn.execute(SCHEMA_CHECK, args).fetchone()
    if row is not None and row[0] == len(codec.ALL_COLUMNS) and all(row[1:]):
        return  # up to date: no DDL, no lock
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SETUP_LOCK,))
        # Our tables are made together: ledger_pause without ledger_history
        # is a history dropped by hand, made again with a row saying so.
        found = conn.execute(_HISTORY_DROPPED).fetchone()
        for stmt in DDL:
            conn.execute(stmt)
        if found is not None and found[0]:
            sql, params = ddl.history_lost_row(str(Instant.now().utc()))
            conn.execute(sql.replace("?", "%s"), params)
        ready = conn.execute(_READY_INSTALLED).fetchone()
        # An older ledger_sortkey put times of large offsets at the wrong instant:
        # the rows it computed are rebuilt with the new one.
        keys = conn.execute(f"SELECT {_function('ledger_sortkey')}", (SORTKEY_VERSION,)).fetchone()
        stale = not (keys and keys[0])
        if not (ready and ready[0]) or stale:  # the ready index (docs/design.md §6.1)
            for stmt in (*READY_DDL, *READY_REBUILD):
                conn.execute(stmt)
        else:  # an older trigger function: replace it (the index stays)
            for stmt in READY_DDL:
                conn.execute(stmt)
        # The Ready order of docs/design.md §8.2 (DUE_DDL): built by the first
        # opener that finds it missing or older, then kept by its triggers.
        row = conn.execute(_DUE_INSTALLED, (DUE_VERSION,)).fetchone()
        for stmt in DUE_DDL:
            conn.execute(stmt)
        if row is None or not row[0] or stale:
            for sql in DUE_REBUILD:
                conn.execute(sql)
