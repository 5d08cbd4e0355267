"""The SQLite ready index and Ready order (docs/design.md §6.1, §8.2; readyindex.py, due.py).

What an SQLite database holds and runs to keep `ledger_needs`, `ledger_ready`
and `ledger_due` current: their tables and indexes (ddl.py) and triggers
written with built-in functions only, since the Go service's connection fires
them too. Three on `ledger_tasks` keep the candidates, every pending or
claimed task whose direct needs are completed; three on `ledger_ready`
(whatever wrote the task, the Go service included: no schedule row means
priority 0, due at CreatedAt) and three on `ledger_schedule` (an admission's
--priority/--not-before) keep the same keys in the Ready order. The
rebuild `doctor --fix` runs and the checks of `ledger doctor` are
readyindex.py's (`derived`) over this dialect. An index built by an older
release (no `ledger_due`) is built by the first opener that migrates
(sqlite_schema.py).
"""

from __future__ import annotations

from ledger_cli.stores.sql import ddl, due
from ledger_cli.stores.sql.readyindex import LIVE, derived

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


DDL = (
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
"""The tables, indexes and triggers, in the order a migration makes them."""

OBJECTS = ddl.created(DDL)
DUE_OBJECTS = tuple(name for name in OBJECTS if name.startswith("ledger_due"))
"""The Ready order's table, index and triggers (`ledger_due` first, then its index)."""
REBUILD_RANGE, READY_REBUILD, DUE_REBUILD, CHECKS = derived(T)


def queue_page_sql(columns: str, lease: str, *, limit: int, queues: int) -> str:
    """`due.page_sql` for the tasks of `queues` named queues, none of them
    `default`, driven from `ledger_queue`'s (queue, key) index (CROSS JOIN
    keeps that order of the loops): it reads those queues' rows, however many
    tasks of other queues sort before them, where the (rank, due, key) walk
    would step over every one. Parameters: the queue names, then page_sql's."""
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    marks = ", ".join(["?"] * queues)
    return (
        f"SELECT {cols}, d.due FROM ledger_queue q CROSS JOIN ledger_due d"
        " CROSS JOIN ledger_tasks t"
        f" WHERE q.queue IN ({marks}) AND d.key = q.key AND t.key = d.key"
        f" AND {due.level_sql('?', lease, limit=limit)}"
    )
