"""The PostgreSQL ready index and Ready order (docs/design.md §6.1, §8.2; readyindex.py, due.py).

What a PostgreSQL schema holds and runs to keep `ledger_needs`, `ledger_ready`
and `ledger_due` current: their tables (ddl.py), the helper functions
(`ledger_sortkey`, `ledger_needs_of`, `ledger_unmet`), the trigger function
`ledger_ready_sync` on `ledger_tasks` (versioned by PG_SYNC_VERSION, so an
opener replaces an older one) and `ledger_due_sync` on `ledger_ready` and
`ledger_schedule` (a row the Go service writes: priority 0, due at CreatedAt;
versioned by DUE_VERSION), and their triggers. The rebuild `doctor --fix`
runs and the checks of `ledger doctor` are readyindex.py's (`derived`) over
this dialect. `claim --next` reads each level's due rows in order with `FOR
UPDATE OF t SKIP LOCKED`, so concurrent claimers spread over the queue.
"""

from __future__ import annotations

from ledger_cli.stores.sql import ddl, due
from ledger_cli.stores.sql.readyindex import LIVE, derived

PG_SYNC_VERSION = "ledger_ready_sync v2"
"""Named in the trigger function's body: `PostgresStore` runs READY_DDL again over
an older one (v1 kept the index on claims and renewals too, planned the
promotion of dependents on every completion, and left ledger_ready's
autovacuum at the default)."""

READY_DDL = (
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


def queue_page_sql(columns: str, lease: str, *, lock: bool, limit: int, queues: int) -> str:
    """`due.page_sql` for the tasks of `queues` named queues, none of them
    `default`: their keys are read first from `ledger_queue`'s (queue, key)
    index (a MATERIALIZED CTE: the planner cannot turn it back into the
    (rank, due, key) walk that steps over every other queue's task), then
    joined to their `ledger_due` rows. Parameters: the queue names, then
    page_sql's."""
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    marks = ", ".join(["%s"] * queues)
    sql = (
        f"WITH q AS MATERIALIZED (SELECT key FROM ledger_queue WHERE queue IN ({marks}))"
        f" SELECT {cols}, d.due FROM q JOIN ledger_due d ON d.key = q.key"
        " JOIN ledger_tasks t ON t.key = d.key"
        f" WHERE {due.level_sql('%s', lease, limit=limit)}"
    )
    return sql + " FOR UPDATE OF t SKIP LOCKED" if lock else sql
