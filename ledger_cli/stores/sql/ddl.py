"""Our side tables' DDL, written once over each dialect's column types
(docs/design.md §3.3, §3.4), and the dialect's SQL the ready index's shared
statements take.

The side tables (history, pause, schedules, queues and limits, the ready
index and the Ready order) are the same tables on both databases; only the
types differ, so each is written here once over a `Types` (what the tables
hold: pause.py, schedules.py, queues.py, readyindex.py, due.py; the triggers
keeping the derived ones stay per dialect: sqlite_schema.py, postgres_schema.py).
The rebuild and the checks of those (readyindex.py `derived`) are written once
over the few expressions a `Types` names too. A key is
PostgreSQL `text COLLATE "C"`, so its order is UTF-8 byte order as on SQLite;
a keyed SQLite table is WITHOUT ROWID (the key is its only index); an
unsigned 64-bit number is an SQLite INTEGER (signed, as the Go store's) and a
checked `numeric(20,0)` on PostgreSQL (`bigint` stops at 2^63-1).
"""

from collections.abc import Callable, Iterable
from typing import NamedTuple


class Types(NamedTuple):
    """A dialect's column types, and its SQL over a task row `t` for the ready index.

    - key: a key (or queue name) column;
    - text, int: plain columns;
    - rowid: what ends a keyed table's definition;
    - serial: the history's id, a primary key the database numbers in order;
    - uint: a required unsigned 64-bit number (`{col}`: the column's name, for a check);
    - needs(x): a set-returning FROM item, aliased `j`, over the needs JSON text `x`;
    - strings: a condition (ending in AND) keeping the string elements of `j`, or '';
    - need: a need of `j`;
    - unmet(k): true when a need of the task keyed `k` is not completed;
    - sortkey(x): RFC3339Nano text `x` as sortable UTC text ('' stays '');
    - later: the later of two texts (`max`, `greatest`);
    - every: a condition every row meets (a rebuild's range over every key).
    """

    key: str
    text: str
    int: str
    rowid: str
    serial: str
    uint: str
    needs: Callable[[str], str]
    strings: str
    need: str
    unmet: Callable[[str], str]
    sortkey: Callable[[str], str]
    later: str
    every: str


def _sqlite_sortkey(x: str) -> str:
    """Built-in functions only (the Go service's connection runs the triggers too).

    The offset is taken off with `±N hours` and `±N minutes` modifiers, not
    given to strftime as a suffix: SQLite reads a suffix only up to ±14:59,
    and RFC 3339 (and Go) allow up to ±23:59. A text that is not RFC 3339
    (no `Z` nor `±hh:mm` at its end) stays itself, as before."""
    off = (
        f"CASE WHEN substr({x}, -1) = 'Z' THEN '+00:00'"
        f" WHEN substr({x}, -6) GLOB '[+-][0-9][0-9]:[0-9][0-9]' THEN substr({x}, -6) END"
    )
    back = f"CASE substr({off}, 1, 1) WHEN '+' THEN '-' ELSE '+' END"
    tzlen = f"CASE WHEN substr({x}, -1) = 'Z' THEN 1 ELSE 6 END"
    frac = (
        f"CASE WHEN instr({x}, '.') = 0 THEN '' ELSE "
        f"substr({x}, instr({x}, '.') + 1, length({x}) - instr({x}, '.') - {tzlen}) END"
    )
    return (
        f"CASE WHEN {x} = '' THEN '' ELSE coalesce("
        f"strftime('%Y-%m-%dT%H:%M:%S', substr({x}, 1, 19),"
        f" {back} || substr({off}, 2, 2) || ' hours', {back} || substr({off}, 5, 2) || ' minutes')"
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


def _call(function: str) -> Callable[[str], str]:
    """A PostgreSQL function of ours (postgres_schema.py) called on an expression."""
    return lambda x: f"{function}({x})"


SQLITE = Types(
    key="TEXT",
    text="TEXT",
    int="INTEGER",
    rowid=" WITHOUT ROWID",
    serial="INTEGER PRIMARY KEY AUTOINCREMENT",
    uint="INTEGER NOT NULL",
    needs=_sqlite_needs,
    strings="j.type = 'text' AND ",
    need="j.value",
    unmet=_sqlite_unmet,
    sortkey=_sqlite_sortkey,
    later="max",
    every="1",
)
PG = Types(
    key='text COLLATE "C"',
    text="text",
    int="integer",
    rowid="",
    serial="bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    uint="numeric(20,0) NOT NULL CHECK ({col} BETWEEN 0 AND 18446744073709551615)",
    needs=_call("ledger_needs_of"),
    strings="",
    need="j",
    unmet=_call("ledger_unmet"),
    sortkey=_call("ledger_sortkey"),
    later="greatest",
    every="TRUE",
)


def created(statements: Iterable[str]) -> tuple[str, ...]:
    """The tables, indexes and triggers `statements` make (`CREATE … IF NOT
    EXISTS name`), in order: what a schema check looks for."""
    words = (s.split(maxsplit=6) for s in statements)
    return tuple(w[5] for w in words if w[0] == "CREATE" and w[2:5] == ["IF", "NOT", "EXISTS"])


def history(t: Types) -> tuple[str, ...]:
    """`ledger_history`, one row per write (`ledger log`), and its index by key."""
    return (
        "CREATE TABLE IF NOT EXISTS ledger_history ("
        f" id {t.serial},"
        f" time {t.text} NOT NULL,"
        f" actor {t.text} NOT NULL,"
        f" event {t.text} NOT NULL,"
        f" key {t.key} NOT NULL,"
        f" fence {t.uint.format(col='fence')},"
        f" data {t.text} NOT NULL)",
        "CREATE INDEX IF NOT EXISTS ledger_history_key ON ledger_history (key, id)",
    )


HISTORY_LOST = "ledger.history_lost"
"""The event of the row a store's open writes when it makes `ledger_history`
again: the table was dropped (by hand) after our schema was set up, its rows
lost (`ledger doctor` names it; docs/design.md §3.3)."""


def history_lost_row(now: str) -> tuple[str, tuple[str, ...]]:
    """The statement (placeholder `?`) and parameters of that row, at `now`."""
    data = (
        "ledger_history was missing (dropped) and was made again empty: the writes"
        " before this line have no history"
    )
    sql = (
        "INSERT INTO ledger_history (time, actor, event, key, fence, data)"
        " VALUES (?, '', ?, '', 0, ?)"
    )
    return sql, (now, HISTORY_LOST, data)


def pause(t: Types) -> tuple[str, ...]:
    """`ledger_pause` and its one row (docs/design.md §8.3; pause.py)."""
    return (
        "CREATE TABLE IF NOT EXISTS ledger_pause ("
        f" id {t.int} PRIMARY KEY CHECK (id = 1),"
        f" paused {t.int} NOT NULL DEFAULT 0,"
        f" since {t.text} NOT NULL DEFAULT '',"
        f" actor {t.text} NOT NULL DEFAULT '',"
        f" reason {t.text} NOT NULL DEFAULT '')",
        "INSERT INTO ledger_pause (id) VALUES (1) ON CONFLICT DO NOTHING",
    )


def _keyed(t: Types, table: str, columns: str) -> str:
    """A table of ours keyed by its primary key (WITHOUT ROWID on SQLite)."""
    return f"CREATE TABLE IF NOT EXISTS {table} ({columns}){t.rowid}"


def schedule(t: Types) -> tuple[str, ...]:
    """`ledger_schedule` (docs/design.md §8.1; schedules.py)."""
    cols = f"key {t.key} PRIMARY KEY, not_before {t.text} NOT NULL DEFAULT '',"
    return (_keyed(t, "ledger_schedule", f"{cols} priority {t.int} NOT NULL DEFAULT 0"),)


def queues(t: Types) -> tuple[str, ...]:
    """`ledger_queue`, `ledger_limit` and `ledger_revoked` (docs/design.md §8.7;
    queues.py). PostgreSQL makes them with the rest of its schema
    (postgres_schema.py, under its set-up lock): a `CREATE TABLE IF NOT
    EXISTS` in two concurrent transactions can fail in one of them."""
    return (
        _keyed(t, "ledger_queue", f"key {t.key} PRIMARY KEY, queue {t.key} NOT NULL"),
        "CREATE INDEX IF NOT EXISTS ledger_queue_by_queue ON ledger_queue (queue, key)",
        _keyed(t, "ledger_limit", f"queue {t.key} PRIMARY KEY, n {t.int} NOT NULL CHECK (n >= 1)"),
        revoked(t),
    )


def revoked(t: Types) -> str:
    """`ledger_revoked`: a revoked lease's slot, until its lease_until (queues.py)."""
    cols = f"key {t.key} NOT NULL, fence {t.uint.format(col='fence')}, queue {t.key} NOT NULL,"
    return _keyed(
        t, "ledger_revoked", f"{cols} lease_until {t.text} NOT NULL, PRIMARY KEY (key, fence)"
    )


def ready(t: Types) -> tuple[str, ...]:
    """The ready index's tables (docs/design.md §6.1; readyindex.py) and the
    pruned marks."""
    needs = f"key {t.key} NOT NULL, need {t.key} NOT NULL, PRIMARY KEY (key, need)"
    return (
        # The keys `ledger prune` pruned (docs/design.md §6.4): a side table, so the mark
        # survives whatever the Go service does to ledger_tasks.
        _keyed(t, "ledger_pruned", f"key {t.key} PRIMARY KEY"),
        _keyed(t, "ledger_needs", needs),
        "CREATE INDEX IF NOT EXISTS ledger_needs_need ON ledger_needs (need)",
        _keyed(t, "ledger_ready", f"key {t.key} PRIMARY KEY, created {t.key} NOT NULL"),
        "CREATE INDEX IF NOT EXISTS ledger_ready_order ON ledger_ready (created, key)",
    )


def due(t: Types) -> tuple[str, ...]:
    """`ledger_due`, the Ready order (docs/design.md §8.2; due.py), and its index."""
    cols = f"key {t.key} PRIMARY KEY, rank {t.int} NOT NULL, due {t.key} NOT NULL"
    return (
        _keyed(t, "ledger_due", cols),
        "CREATE INDEX IF NOT EXISTS ledger_due_order ON ledger_due (rank, due, key)",
    )
