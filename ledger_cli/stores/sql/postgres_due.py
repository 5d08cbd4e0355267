"""The Ready order of docs/design.md §8.2 in the PostgreSQL ready index: `ledger_due`.

As on SQLite (stores/sql/sqlite_due.py, due.py): `ledger_due (key, rank, due)`
holds the candidates of `ledger_ready` in the Ready order, kept by the
trigger function `ledger_due_sync` on `ledger_ready` and
`ledger_schedule` (a row the Go service writes: priority 0, due at
CreatedAt). `claim --next` walks the priority levels present, highest
first, reading each level's due rows in order with `FOR UPDATE OF t SKIP
LOCKED`, so concurrent claimers spread over the queue as before.
"""

from __future__ import annotations

from ledger_cli.stores.sql import ddl, due

DUE_VERSION = "ledger_due_sync v1"

DDL = (
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

_ROWS = due.rows_sql("greatest", "ledger_sortkey(s.not_before)")
REBUILD_RANGE = due.rebuild_range(_ROWS)
REBUILD = tuple(s.format(key="TRUE", r_key="TRUE") for s in REBUILD_RANGE)

CHECKS = due.checks(_ROWS)


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
