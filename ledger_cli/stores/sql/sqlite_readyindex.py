"""The SQLite half of the ready index (docs/design.md §6.1; stores/sql/readyindex.py).

What an SQLite database holds and runs to keep `ledger_needs` and
`ledger_ready` current: the side tables and their indexes, the three triggers
on `ledger_tasks` (written with built-in functions only, since the Go
service's connection fires them too), the statements `doctor --fix` rebuilds
the tables with, and the checks `ledger doctor` runs against them; plus
`_sqlite_sortkey`, the SQL turning RFC3339Nano text into the sortable UTC text
the index compares, and SQLITE_LEASE, a candidate's lease in that form.
"""

from __future__ import annotations

from ledger_cli.stores.sql import ddl
from ledger_cli.stores.sql.readyindex import LIVE, IndexSql, checks, rebuild_range


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

SQLITE_TABLES = ddl.ready(ddl.SQLITE)

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

_INDEX_SQL = IndexSql(
    needs=_sqlite_needs("t.needs"),
    text="j.type = 'text' AND ",
    value="j.value",
    unmet=_sqlite_unmet("t.key"),
    sortkey=_sqlite_sortkey("t.created_at"),
)

SQLITE_REBUILD_RANGE = rebuild_range(_INDEX_SQL)
"""The rebuild of one key range (readyindex.py `rebuild_range`)."""

SQLITE_REBUILD = tuple(s.format(key="1", t_key="1") for s in SQLITE_REBUILD_RANGE)
"""The whole rebuild, in one transaction (when the side tables are installed)."""

SQLITE_CHECKS = checks(_INDEX_SQL)

SQLITE_LEASE = _sqlite_sortkey("t.lease_until")
