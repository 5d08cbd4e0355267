"""Writing what the Go `SQLiteStore` writes, with plain SQL (docs/design.md §3.3).

`go_db(path)` creates the database exactly as the Go store does (its DDL, its
pragmas, no table of ours); `go_row(conn, key=…, status=…, …)` inserts a row as
the Go store's INSERT does, and `go_update` runs its conditional UPDATE. Any
text value may be given as `bytes`: Go strings are bytes, and the Go driver
binds them as TEXT unchanged, valid UTF-8 or not; here that is
`CAST(? AS TEXT)`, which stores the bytes as a TEXT value the same way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from ledger_cli.stores.sql.sqlite_schema import GO_DDL

GO_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
)
GO_BUSY_TIMEOUT = 5.0
"""The Go store's busy timeout (seconds)."""

_COLUMNS = (
    "key",
    "status",
    "sequence",
    "owner",
    "fence",
    "lease_until",
    "needs",
    "blocked_by",
    "task",
    "created_at",
    "updated_at",
    "created_by",
    "updated_by",
)
_TEXT = frozenset(_COLUMNS) - {"sequence", "fence", "task"}

T_GO = "2024-01-01T00:00:00Z"


def go_connect(path: Path, busy_timeout: float = GO_BUSY_TIMEOUT) -> sqlite3.Connection:
    """A connection set up as the Go store sets up its pool."""
    conn = sqlite3.connect(
        path, isolation_level=None, timeout=busy_timeout, check_same_thread=False
    )
    for pragma in GO_PRAGMAS:
        if pragma.startswith("PRAGMA busy_timeout"):
            pragma = f"PRAGMA busy_timeout={int(busy_timeout * 1000)}"
        conn.execute(pragma)
    return conn


def go_db(path: Path) -> sqlite3.Connection:
    """The database as `NewSQLiteStore` creates it: the Go table only."""
    conn = go_connect(path)
    conn.execute(GO_DDL)
    return conn


def _bind(value: Any) -> tuple[str, Any]:
    if isinstance(value, bytes):
        return "CAST(? AS TEXT)", value
    return "?", value


def go_row(conn: sqlite3.Connection, **row: Any) -> None:
    """INSERT … ON CONFLICT(key) DO NOTHING with the Go store's defaults
    (nil Needs as `[]`, the zero time as '', a nil Task as `null`)."""
    values: dict[str, Any] = {
        "sequence": 1,
        "owner": "",
        "fence": 0,
        "lease_until": "",
        "needs": "[]",
        "blocked_by": "",
        "task": b"null",
        "created_at": T_GO,
        "updated_at": T_GO,
        "created_by": "go-service",
        "updated_by": "go-service",
        **row,
    }
    marks: list[str] = []
    params: list[Any] = []
    for col in _COLUMNS:
        value = values[col]
        if col in _TEXT:
            mark, value = _bind(value)
        else:
            mark = "?"
        marks.append(mark)
        params.append(value)
    sql = (
        f"INSERT INTO ledger_tasks ({', '.join(_COLUMNS[:9])}, rev, {', '.join(_COLUMNS[9:])})"
        f" VALUES ({', '.join(marks[:9])}, 0, {', '.join(marks[9:])}) ON CONFLICT(key) DO NOTHING"
    )
    conn.execute(sql, params)


def raw_rows(path: Path) -> dict[bytes, tuple[Any, ...]]:
    """Every row, text columns as their exact bytes, keyed by the key's bytes."""
    conn = sqlite3.connect(path)
    conn.text_factory = bytes
    try:
        rows = conn.execute("SELECT * FROM ledger_tasks").fetchall()
    finally:
        conn.close()
    return {row[0]: tuple(row) for row in rows}
