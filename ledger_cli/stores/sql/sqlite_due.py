"""The Ready order of docs/design.md §8.2 in the SQLite ready index: `ledger_due`.

`ledger_ready` (stores/sql/readyindex.py, sqlite_readyindex.py) keeps the
candidates, every pending or claimed task whose direct needs are completed.
`ledger_due (key, rank, due)` keeps the same keys in the Ready order: `rank`
is minus the priority (so ascending is highest first), `due` the later of
CreatedAt and not-before as the same sortable UTC text, indexed by (rank,
due, key). Triggers in built-in SQL keep it current: on `ledger_ready`
(whatever wrote the task, the Go service included: no schedule row means
priority 0, due at CreatedAt) and on `ledger_schedule` (an admission's --priority/--not-before).

`claim --next` walks the priority levels present (due.py). The cost is one
seek per level present plus the candidates read, not the backlog. An index
built by an older release (no `ledger_due`) is built by the first opener
that migrates; `ledger doctor` checks it and `--fix` rebuilds it.
"""

from __future__ import annotations

from ledger_cli.stores.sql import ddl, due
from ledger_cli.stores.sql.sqlite_readyindex import _sqlite_sortkey

OBJECTS = (
    "ledger_due",
    "ledger_due_order",
    "ledger_due_ready_insert",
    "ledger_due_ready_update",
    "ledger_due_ready_delete",
    "ledger_due_schedule_insert",
    "ledger_due_schedule_update",
    "ledger_due_schedule_delete",
)

_NB = _sqlite_sortkey("s.not_before")
_ROWS = due.rows_sql("max", _NB)


def _row_of(key: str, created: str) -> str:
    """SELECT of the ledger_due row of a candidate (key, created text)."""
    return (
        f"SELECT {key}, -coalesce(s.priority, 0), max({created}, coalesce({_NB}, ''))"
        f" FROM (SELECT 1) one LEFT JOIN ledger_schedule s ON s.key = {key}"
    )


DDL = (
    *ddl.due(ddl.SQLITE),
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

REBUILD_RANGE = due.rebuild_range(_ROWS)
REBUILD = tuple(s.format(key="1", r_key="1") for s in REBUILD_RANGE)
CHECKS = due.checks(_ROWS)


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
