"""The column types our tables are written over, per dialect (docs/design.md §3.3, §3.4).

The side tables (history, pause, schedules, queues and limits, the ready
index and the Ready order) are the same tables on both databases; only the
types differ, so each is written once over a `Types` (pause.py,
schedules.py, queues.py, readyindex.py, due.py, the schemas). A key is
PostgreSQL `text COLLATE "C"`, so its order is UTF-8 byte order as on SQLite;
a keyed SQLite table is WITHOUT ROWID (the key is its only index); an
unsigned 64-bit number is an SQLite INTEGER (signed, as the Go store's) and a
checked `numeric(20,0)` on PostgreSQL (`bigint` stops at 2^63-1).
"""

from __future__ import annotations

from typing import NamedTuple


class Types(NamedTuple):
    key: str
    """A key (or queue name) column."""
    text: str
    int: str
    rowid: str
    """What ends a keyed table's definition."""
    serial: str
    """The history's id: a primary key the database numbers in order."""
    uint: str
    """A required unsigned 64-bit number (`{col}`: the column's name, for a check)."""


SQLITE = Types(
    key="TEXT",
    text="TEXT",
    int="INTEGER",
    rowid=" WITHOUT ROWID",
    serial="INTEGER PRIMARY KEY AUTOINCREMENT",
    uint="INTEGER NOT NULL",
)
PG = Types(
    key='text COLLATE "C"',
    text="text",
    int="integer",
    rowid="",
    serial="bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    uint="numeric(20,0) NOT NULL CHECK ({col} BETWEEN 0 AND 18446744073709551615)",
)


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
