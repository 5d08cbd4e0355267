"""The PostgreSQL half of the ready index (docs/design.md §6.1; stores/sql/readyindex.py).

What a PostgreSQL schema holds and runs to keep `ledger_needs` and
`ledger_ready` current: the side tables, the helper functions
(`ledger_sortkey`, `ledger_needs_of`, `ledger_unmet`), the `ledger_ready_sync`
trigger function (versioned by PG_SYNC_VERSION, so an opener replaces an older
one) and its trigger, the statements `doctor --fix` rebuilds the tables with,
and the checks `ledger doctor` runs against them.
"""

from __future__ import annotations

from ledger_cli.stores.sql import ddl
from ledger_cli.stores.sql.readyindex import LIVE, IndexSql, checks, rebuild_range

PG_LEASE = "ledger_sortkey(t.lease_until)"


PG_SYNC_VERSION = "ledger_ready_sync v2"
"""Named in the trigger function's body: `PostgresStore` runs PG_DDL again over
an older one (v1 kept the index on claims and renewals too, planned the
promotion of dependents on every completion, and left ledger_ready's
autovacuum at the default)."""

PG_DDL = (
    *ddl.ready(ddl.PG),
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

_INDEX_SQL = IndexSql(
    needs="ledger_needs_of(t.needs)",
    text="",
    value="j",
    unmet="ledger_unmet(t.key)",
    sortkey="ledger_sortkey(t.created_at)",
)

PG_REBUILD_RANGE = rebuild_range(_INDEX_SQL)
"""The rebuild of one key range (readyindex.py `rebuild_range`)."""

PG_REBUILD = tuple(s.format(key="TRUE", t_key="TRUE") for s in PG_REBUILD_RANGE)
"""The whole rebuild, in one transaction (when the side tables are installed)."""

PG_CHECKS = checks(_INDEX_SQL)
