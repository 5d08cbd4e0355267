"""The SQL stores' listing reads treat odd text alike on both databases (stores/sql/reads.py).

A status or key holding a NUL matches exactly the records stored with it: on
SQLite, which can hold one, those records; on PostgreSQL, which cannot, none,
without an error. `blocked_by_keys` reads `blocked_by` as the records' own
reads do (lossless text, a NULL as ""), whichever database wrote it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine import badrows
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreError
from tests.stores import KINDS

T0 = Instant.parse("2026-03-01T00:00:00Z")


def _rec(key: str, status: str, blocked_by: str = "") -> TaskState:
    return TaskState(
        key=key,
        status=status,
        sequence=1,
        blocked_by=blocked_by,
        created_by="tester",
        created_at=T0,
        updated_by="tester",
        updated_at=T0,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, str, str]]:
    """An SQL store, the scheme and its location (for a raw connection)."""
    kind = KINDS[str(request.param)]
    with kind.place(tmp_path) as location:
        store = kind.open(location, lambda: T0)
        try:
            yield store, kind.scheme, location
        finally:
            store.close()


def _raw(scheme: str, location: str, *statements: str) -> None:
    """Run statements on the store's database behind the store's back."""
    if scheme == "sqlite":
        with contextlib.closing(sqlite3.connect(location, isolation_level=None)) as conn:
            for sql in statements:
                conn.execute(sql)
        return
    import psycopg

    with psycopg.connect(location, autocommit=True) as pg:
        for sql in statements:
            pg.execute(sql)  # type: ignore[call-overload]


def test_a_status_or_key_holding_nul_matches_only_records_stored_with_it(
    sql_store: tuple[Any, str, str],
) -> None:
    store = sql_store[0]
    odd = "pend\x00ing"
    assert store.compare_and_swap("k", None, _rec("k", "pending"))
    try:
        stored = store.compare_and_swap("odd", None, _rec("odd", odd))
    except StoreError:  # a database that cannot hold a NUL (PostgreSQL)
        stored = False
    want = ["odd"] if stored else []
    # A status that does not validate: a listing goes around the row, naming it
    # (docs/design.md §5.5), so the row each read matched is the one noted.
    with badrows.around(store) as bad:
        assert [r.key for r in store.by_status([odd])] == []
        assert [r.key for r in store.visible_after("a\x00", [odd, "pending"])] == ["k"]
    assert ["odd" in name for name in bad.found] == [True] * len(want)
    assert store.dependents(["a\x00b"]) == []
    assert list(store.read_history("a\x00b")) == []


def test_blocked_by_keys_reads_blocked_by_as_the_records_do(
    sql_store: tuple[Any, str, str],
) -> None:
    store, scheme, location = sql_store
    for key, root in (("b1", "root"), ("b2", "other"), ("b3", "root")):
        assert store.compare_and_swap(key, None, _rec(key, "blocked", root))
    # Written by another program: a NULL where the column allows one.
    if scheme == "sqlite":
        _raw(scheme, location, "UPDATE ledger_tasks SET blocked_by = X'ff6f' WHERE key = 'b2'")
    else:
        _raw(
            scheme,
            location,
            "ALTER TABLE ledger_tasks ALTER COLUMN blocked_by DROP NOT NULL",
            "UPDATE ledger_tasks SET blocked_by = NULL WHERE key = 'b2'",
        )
    if scheme != "sqlite":  # blocked naming no BlockedBy: a row that does not validate
        with pytest.raises(StoreError, match="'b2' does not validate"):
            store.by_status(["blocked"])
        return
    records = store.by_status(["blocked"])
    assert sorted(store.blocked_by_keys()) == sorted({r.blocked_by for r in records})
