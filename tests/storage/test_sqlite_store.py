"""SQLiteStore: Go schema compatibility, the CAS contract, batches, history,
injection-proofness, errors. (The replay of every
unbounded trace on this store is in tests/storage/test_store_conformance.py.)"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli import errors
from ledger_cli.engine import gojson
from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.stores.sql.sqlite import SQLiteStore
from tests.sql_support import HOSTILE_TEXTS

T0 = Instant.parse("2024-01-01T00:00:00Z")
HOUR = timedelta(hours=1)
A = "test-actor"

# The Go store's table, written out from docs/design.md §3.3 (independently of
# ledger_cli.stores.sql.sqlite_schema.GO_DDL, so a drift in either shows up here).
GO_DDL = """CREATE TABLE IF NOT EXISTS ledger_tasks (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until TEXT NOT NULL DEFAULT '',
    needs TEXT NOT NULL DEFAULT '[]',
    blocked_by TEXT NOT NULL DEFAULT '',
    task BLOB,
    rev INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    updated_by TEXT NOT NULL DEFAULT ''
)"""
# An older Go table: the migration adds the four audit columns.
GO_LEGACY_DDL = """CREATE TABLE IF NOT EXISTS ledger_tasks (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until TEXT NOT NULL DEFAULT '',
    needs TEXT NOT NULL DEFAULT '[]',
    blocked_by TEXT NOT NULL DEFAULT '',
    task BLOB,
    rev INTEGER NOT NULL DEFAULT 0
)"""
GO_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
)
GO_INSERT = (
    "INSERT INTO ledger_tasks (key, status, sequence, owner, fence, lease_until, needs,"
    " blocked_by, task, rev, created_at, updated_at, created_by, updated_by)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"
)
GO_UPDATE = (
    "UPDATE ledger_tasks SET status=?, sequence=?, owner=?, fence=?, lease_until=?, needs=?,"
    " blocked_by=?, task=?, rev=rev+1, updated_at=?, updated_by=?"
    " WHERE key=? AND sequence=? AND status=? AND fence=? AND rev=?"
)
RFC3339NANO = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]*[1-9])?(Z|[+-][0-9]{2}:[0-9]{2})"
)
INT64_MAX = 2**63 - 1


def go_connect(path: Path) -> sqlite3.Connection:
    """A connection set up as the Go store sets up its pool."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5, check_same_thread=False)
    for pragma in GO_PRAGMAS:
        conn.execute(pragma)
    return conn


def go_insert(conn: sqlite3.Connection, **row: Any) -> None:
    """A row exactly as the Go store writes one (nil Needs as `[]`, zero time as '')."""
    values = {
        "owner": "",
        "fence": 0,
        "lease_until": "",
        "needs": "[]",
        "blocked_by": "",
        "task": b"null",
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "created_by": "go-service",
        "updated_by": "go-service",
        **row,
    }
    cur = conn.execute(
        GO_INSERT,
        (
            values["key"],
            values["status"],
            values["sequence"],
            values["owner"],
            values["fence"],
            values["lease_until"],
            values["needs"],
            values["blocked_by"],
            values["task"],
            values["created_at"],
            values["updated_at"],
            values["created_by"],
            values["updated_by"],
        ),
    )
    assert cur.rowcount == 1


def raw_rows(path: Path) -> dict[str, dict[str, Any]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT *, typeof(task) AS task_type FROM ledger_tasks").fetchall()
        return {row["key"]: dict(row) for row in rows}
    finally:
        conn.close()


def table_info(path: Path, table: str = "ledger_tasks") -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [tuple(r) for r in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


def go_accepts(path: Path) -> None:
    """Read every row as the Go store does, asserting each read would succeed.

    Go scans TEXT into strings, INTEGER into uint64 (database/sql refuses a
    negative int64 there), unmarshals `needs` into []IdempotencyKey (`null`
    -> nil, `[]` -> empty), the task BLOB into `any` (empty -> nil), and parses
    non-empty times with time.Parse(time.RFC3339Nano).
    """
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT key, typeof(key), status, typeof(status), sequence, typeof(sequence),"
            " owner, typeof(owner), fence, typeof(fence), lease_until, typeof(lease_until),"
            " needs, typeof(needs), blocked_by, typeof(blocked_by), task, typeof(task),"
            " rev, typeof(rev), created_at, typeof(created_at), updated_at, typeof(updated_at),"
            " created_by, typeof(created_by), updated_by, typeof(updated_by) FROM ledger_tasks"
        ).fetchall()
    finally:
        conn.close()
    for row in rows:
        (
            key,
            tk,
            status,
            ts,
            seq,
            tseq,
            owner,
            to,
            fence,
            tf,
            lease,
            tl,
            needs,
            tn,
            blocked,
            tb,
            task,
            ttask,
            rev,
            trev,
            cat,
            tcat,
            uat,
            tuat,
            cby,
            tcby,
            uby,
            tuby,
        ) = row
        where = f"row {key!r}"
        for value, kind in (
            (key, tk),
            (status, ts),
            (owner, to),
            (lease, tl),
            (needs, tn),
            (blocked, tb),
            (cat, tcat),
            (uat, tuat),
            (cby, tcby),
            (uby, tuby),
        ):
            assert kind == "text", f"{where}: {value!r} stored as {kind}"
        for value, kind in ((seq, tseq), (fence, tf), (rev, trev)):
            assert kind == "integer" and 0 <= value <= INT64_MAX, f"{where}: {value!r} {kind}"
        assert ttask in ("blob", "null"), f"{where}: task stored as {ttask}"
        parsed = json.loads(needs)
        assert parsed is None or (
            isinstance(parsed, list) and all(isinstance(k, str) for k in parsed)
        ), f"{where}: needs {needs!r}"
        if task:
            json.loads(task)
        for text in (lease, cat, uat):
            assert text == "" or RFC3339NANO.fullmatch(text), f"{where}: time {text!r}"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def store(db: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(db) as s:
        yield s


# -- Go compatibility -----------------------------------------------------------


def test_created_schema_is_the_go_schema(db: Path, tmp_path: Path) -> None:
    SQLiteStore(db).close()
    go_db = tmp_path / "go.db"
    conn = go_connect(go_db)
    conn.execute(GO_DDL)
    conn.close()
    # Same columns, types, NOT NULL, defaults and primary key: the Go store's
    # CREATE TABLE IF NOT EXISTS is a no-op here and its migration finds every column.
    assert table_info(db) == table_info(go_db)
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        objects = {
            (kind, name)
            for kind, name in conn.execute("SELECT type, name FROM sqlite_master")
            if not name.startswith("sqlite_")
        }
        plan = " ".join(
            str(r[-1])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT key FROM ledger_tasks WHERE status IN (?, ?)",
                ("pending", "claimed"),
            )
        )
    finally:
        conn.close()
    assert objects == {
        ("table", "ledger_tasks"),
        ("table", "ledger_pause"),
        ("table", "ledger_schedule"),
        ("table", "ledger_due"),
        ("index", "ledger_due_order"),
        ("trigger", "ledger_due_ready_insert"),
        ("trigger", "ledger_due_ready_update"),
        ("trigger", "ledger_due_ready_delete"),
        ("trigger", "ledger_due_schedule_insert"),
        ("trigger", "ledger_due_schedule_update"),
        ("trigger", "ledger_due_schedule_delete"),
        ("index", "ledger_tasks_claimable"),
        ("table", "ledger_history"),
        ("index", "ledger_history_key"),
        # The ready index (docs/design.md §6.1): side tables kept by triggers, all ledger_*;
        # the keys `ledger prune` pruned (docs/design.md §6.4).
        ("table", "ledger_pruned"),
        ("table", "ledger_needs"),
        ("index", "ledger_needs_need"),
        ("table", "ledger_ready"),
        ("index", "ledger_ready_order"),
        ("trigger", "ledger_ready_insert"),
        ("trigger", "ledger_ready_update"),
        ("trigger", "ledger_ready_delete"),
    }
    assert "ledger_tasks_claimable" in plan


def test_store_connection_is_wal_full_with_busy_timeout(store: SQLiteStore) -> None:
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def make_go_database(path: Path, ddl: str = GO_DDL) -> None:
    conn = go_connect(path)
    conn.execute(ddl)
    if ddl is GO_DDL:
        go_insert(
            conn,
            key="a",
            status="pending",
            sequence=1,
            task=b'{"n":1,"s":"x\\u003cy","f":1.5,"big":9007199254740993}',
            created_at="2024-01-01T01:00:00.123456789+01:00",
            updated_at="2024-01-01T00:00:00.123456789Z",
        )
        go_insert(
            conn,
            key="b",
            status="claimed",
            sequence=3,
            owner="worker-1",
            fence=7,
            lease_until="2024-01-01T01:00:00.000000001Z",
            needs='["a"]',
            task=b'"payload"',
            created_by="svc",
        )
        go_insert(conn, key="c", status="pending", sequence=2, task=None)
        go_insert(conn, key="d", status="failed", sequence=1, owner="w", fence=1, task=b"")
        go_insert(
            conn,
            key="e",
            status="blocked",
            sequence=1,
            blocked_by="d",
            needs='["d"]',
            task=b"[1,2,3]",
        )
        go_insert(conn, key="max", status="pending", sequence=INT64_MAX, fence=INT64_MAX)
        conn.execute("UPDATE ledger_tasks SET rev = 4 WHERE key = 'b'")
    conn.close()


def test_go_database_opens_reads_and_updates(tmp_path: Path) -> None:
    path = tmp_path / "go.db"
    make_go_database(path)
    before_schema = table_info(path)
    before = raw_rows(path)

    with SQLiteStore(path) as store:
        a = store.load("a")
        assert a is not None
        assert a == TaskState(
            key="a",
            status="pending",
            sequence=1,
            needs=(),  # Go writes nil Needs as [] and reads it back as an empty list
            task={"n": 1, "s": "x<y", "f": 1.5, "big": 9007199254740993},
            created_by="go-service",
            created_at=Instant.parse("2024-01-01T00:00:00.123456789Z"),
            updated_by="go-service",
            updated_at=Instant.parse("2024-01-01T00:00:00.123456789Z"),
        )
        assert type(a.task["n"]) is int and type(a.task["big"]) is int
        assert str(a.created_at) == "2024-01-01T01:00:00.123456789+01:00"  # offset kept
        b = store.load("b")
        assert b is not None
        assert (b.status, b.owner, b.fence, b.rev, b.needs, b.task) == (
            "claimed",
            "worker-1",
            7,
            4,
            ("a",),
            "payload",
        )
        assert b.lease_until == Instant.parse("2024-01-01T01:00:00.000000001Z")
        c, d = store.load("c"), store.load("d")
        assert c is not None and c.task is None and c.lease_until.is_zero()
        assert d is not None and d.task is None
        mx = store.load("max")
        assert mx is not None and (mx.sequence, mx.fence) == (INT64_MAX, INT64_MAX)
        assert [r.key for r in store.range()] == ["a", "b", "c", "d", "e", "max"]

        ledger = Ledger(store)
        now = Instant.parse("2024-06-01T12:00:00.5Z")
        assert ledger.claim("cli", "a", "shell", HOUR, now) == 1
        ledger.complete("cli", "a", "shell", 1, "completed", now)
        assert ledger.claim("cli", "b", "shell", HOUR, now) == 8  # b's lease expired
        ledger.release("cli", "b", "shell", 8, now)
        assert ledger.admit("cli", "c", 5, {"v": 2}, now) is True  # rebase keeps Needs kind
        assert ledger.blocked("e") == "d"
        assert ledger.admit("cli", "new", 1, "hi", now, "a") is True

    after = raw_rows(path)
    assert table_info(path) == before_schema
    # Updates never rewrite created_at/created_by and bump rev in SQL.
    for key in ("a", "b", "c"):
        assert after[key]["created_at"] == before[key]["created_at"]
        assert after[key]["created_by"] == before[key]["created_by"]
    assert after["a"]["rev"] == 2 and after["a"]["status"] == "completed"
    assert after["a"]["needs"] == "[]"  # a Go row's [] stays []
    assert after["a"]["task"] == b'{"big":9007199254740993,"f":1.5,"n":1,"s":"x\\u003cy"}'
    assert after["a"]["updated_at"] == "2024-06-01T12:00:00.5Z"
    assert after["a"]["lease_until"] == "2024-06-01T13:00:00.5Z"
    assert after["b"]["rev"] == 6 and after["b"]["fence"] == 8
    assert after["b"]["lease_until"] == "" and after["b"]["owner"] == ""
    assert after["c"]["rev"] == 1 and after["c"]["needs"] == "null"  # admitted without needs
    assert after["c"]["task"] == b'{"v":2}'
    assert after["new"]["needs"] == '["a"]' and after["new"]["rev"] == 0
    assert after["new"]["created_at"] == "2024-06-01T12:00:00.5Z"
    assert {k: after[k] for k in ("d", "e", "max")} == {k: before[k] for k in ("d", "e", "max")}
    go_accepts(path)


def test_go_updates_rows_we_wrote(db: Path) -> None:
    with SQLiteStore(db) as store:
        Ledger(store).admit(A, "k", 1, {"x": [1, 2]}, T0)
    conn = go_connect(db)
    cur = conn.execute(
        GO_UPDATE,
        (
            "claimed",
            1,
            "go",
            1,
            "2024-01-01T01:00:00Z",
            "null",
            "",
            b'{"x":[1,2]}',
            "2024-01-01T00:00:01Z",
            "go-service",
            "k",
            1,
            "pending",
            0,
            0,
        ),
    )
    assert cur.rowcount == 1
    conn.close()
    with SQLiteStore(db) as store:
        rec = store.load("k")
        assert rec is not None
        got = (rec.status, rec.owner, rec.fence, rec.rev, rec.needs)
        assert got == ("claimed", "go", 1, 1, None)
        assert rec.created_by == A and rec.updated_by == "go-service"
        Ledger(store).complete(A, "k", "go", 1, "completed", T0 + HOUR)
        assert store.load("k") == rec.replace(
            status="completed", rev=2, updated_by=A, updated_at=T0 + HOUR
        )


def test_legacy_go_schema_is_migrated_idempotently(tmp_path: Path) -> None:
    path = tmp_path / "legacy.db"
    make_go_database(path, GO_LEGACY_DDL)
    conn = go_connect(path)
    conn.execute(
        "INSERT INTO ledger_tasks (key, status, sequence, task) VALUES ('old', 'pending', 2, ?)",
        (b'{"a":1}',),
    )
    conn.close()
    with SQLiteStore(path) as store:
        rec = store.load("old")
        assert rec is not None
        assert rec.created_at.is_zero() and rec.created_by == "" and rec.needs == ()
        assert rec.task == {"a": 1} and rec.sequence == 2
    migrated = table_info(path)
    go_db = tmp_path / "go.db"
    go_connect(go_db).execute(GO_DDL)
    assert migrated == table_info(go_db)
    with SQLiteStore(path) as store:  # idempotent
        Ledger(store).claim(A, "old", "o", HOUR, T0)
    assert table_info(path) == migrated
    assert raw_rows(path)["old"]["created_at"] == ""
    go_accepts(path)


def test_a_table_that_is_not_ours_is_refused(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE ledger_tasks (key TEXT PRIMARY KEY, colour TEXT)")
    conn.close()
    with pytest.raises(errors.StoreError, match="not a ledger database"):
        SQLiteStore(db)


@pytest.mark.parametrize(
    ("needs", "column"),
    [(None, "null"), ((), "[]"), (("a",), '["a"]'), (("x<y", 'q"'), '["x\\u003cy","q\\""]')],
)
def test_needs_kinds_round_trip_and_encode(
    store: SQLiteStore, db: Path, needs: tuple[str, ...] | None, column: str
) -> None:
    rec = TaskState(
        key="k", status="pending", sequence=1, needs=needs, created_at=T0, updated_at=T0
    )
    assert store.compare_and_swap("k", None, rec)
    got = store.load("k")
    assert got == rec and got is not None and got.needs == needs
    assert (got.needs is None) == (needs is None)
    assert raw_rows(db)["k"]["needs"] == column
    go_accepts(db)


def test_rows_we_write_use_go_encodings(store: SQLiteStore, db: Path) -> None:
    task = {"z": [1, 2.5, None, True, "<&>"], "a": {"b": 1e21, "c": 1e-7}, "n": 2**60}
    rec = TaskState(
        key="k",
        status="claimed",
        sequence=9,
        owner="o",
        fence=3,
        lease_until=Instant.parse("2024-01-01T03:00:00.000000001+02:00"),
        task=task,
        created_by="c",
        created_at=Instant.parse("0000-12-31T23:00:00Z"),
        updated_by="u",
        updated_at=Instant.parse("2024-01-01T00:00:00.1-07:30"),
    )
    assert store.compare_and_swap("k", None, rec.replace(rev=5))
    row = raw_rows(db)["k"]
    assert row == {
        "key": "k",
        "status": "claimed",
        "sequence": 9,
        "owner": "o",
        "fence": 3,
        "lease_until": "2024-01-01T03:00:00.000000001+02:00",
        "needs": "null",
        "blocked_by": "",
        "task": gojson.encode_value(task).encode(),
        "rev": 0,  # an insert is rev 0 whatever new.rev says
        "created_at": "0000-12-31T23:00:00Z",
        "updated_at": "2024-01-01T00:00:00.1-07:30",
        "created_by": "c",
        "updated_by": "u",
        "task_type": "blob",
    }
    got = store.load("k")
    assert got is not None
    assert got == rec.replace(task={**task, "n": float(2**60)})
    assert str(got.lease_until) == "2024-01-01T03:00:00.000000001+02:00"
    go_accepts(db)


def test_zero_times_are_empty_text(store: SQLiteStore, db: Path) -> None:
    store.compare_and_swap("k", None, TaskState(key="k", status="pending", sequence=1))
    row = raw_rows(db)["k"]
    assert (row["lease_until"], row["created_at"], row["updated_at"]) == ("", "", "")
    assert row["task"] == b"null"
    rec = store.load("k")
    assert rec is not None and rec.created_at.is_zero() and rec.task is None


def test_a_running_go_writer_is_waited_for(store: SQLiteStore, db: Path) -> None:
    go = go_connect(db)
    go.execute("BEGIN IMMEDIATE")
    go_insert(go, key="from-go", status="pending", sequence=1)
    committing = threading.Event()
    released = threading.Event()

    def commit_later() -> None:
        time.sleep(0.4)  # a chance for the admit to start waiting (not needed to pass)
        committing.set()
        go.execute("COMMIT")
        released.set()

    thread = threading.Thread(target=commit_later)
    thread.start()
    assert Ledger(store).admit(A, "from-cli", 1, None, T0) is True  # waits on the busy timeout
    assert committing.is_set()  # it got through only once the Go writer committed
    thread.join()
    assert released.is_set()
    assert [r.key for r in store.range()] == ["from-cli", "from-go"]
    go.close()


def test_write_lock_held_too_long_is_a_store_error(db: Path) -> None:
    with SQLiteStore(db, busy_timeout=0.2) as store:
        go = go_connect(db)
        go.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(errors.StoreError, match=r"locked.*retry") as info:
                Ledger(store).admit(A, "k", 1, None, T0)
            assert "\n" not in str(info.value)
            # Reads go on in WAL mode while a writer holds the lock.
            assert store.load("k") is None
        finally:
            go.execute("ROLLBACK")
            go.close()
        assert Ledger(store).admit(A, "k", 1, None, T0) is True


# -- the CAS contract -----------------------------------------------------------


def test_cas_insert_if_absent_and_rev(store: SQLiteStore) -> None:
    rec = TaskState(key="k", status="pending", sequence=1, created_at=T0, updated_at=T0)
    assert store.compare_and_swap("k", None, rec.replace(rev=9))
    assert not store.compare_and_swap("k", None, rec.replace(sequence=2))
    cur = store.load("k")
    assert cur == rec and cur is not None and cur.rev == 0
    nxt = cur.replace(status="claimed", owner="o", fence=1, lease_until=T0 + HOUR, rev=77)
    assert store.compare_and_swap("k", cur, nxt)
    got = store.load("k")
    assert got == nxt.replace(rev=1)
    assert not store.compare_and_swap("k", cur, nxt)  # stale rev


@pytest.mark.parametrize("field", ["sequence", "status", "fence", "rev"])
def test_cas_compares_the_four_fields(store: SQLiteStore, field: str) -> None:
    rec = TaskState(key="k", status="pending", sequence=1)
    store.compare_and_swap("k", None, rec)
    cur = store.load("k")
    assert cur is not None
    wrong = {"sequence": 2, "status": "claimed", "fence": 1, "rev": 1}[field]
    assert not store.compare_and_swap("k", cur.replace(**{field: wrong}), cur.replace(owner="x"))
    assert store.load("k") == cur
    # Fields outside the tuple do not take part.
    other = cur.replace(owner="o", task={"t": 1}, needs=("n",), updated_by="zz")
    assert store.compare_and_swap("k", other, cur.replace(owner="y"))


def test_cas_against_a_missing_key_fails(store: SQLiteStore) -> None:
    old = TaskState(key="k", status="pending", sequence=1)
    assert not store.compare_and_swap("k", old, old)
    assert not store.compare_and_swap("k", TaskState(), old)
    assert store.load("k") is None


def test_uint_values_beyond_int64_are_refused(store: SQLiteStore) -> None:
    rec = TaskState(key="k", status="pending", sequence=INT64_MAX, fence=INT64_MAX)
    assert store.compare_and_swap("k", None, rec)
    assert store.load("k") == rec
    with pytest.raises(errors.StoreError, match="signed 64-bit"):
        store.compare_and_swap("big", None, rec.replace(key="big", sequence=2**63))
    assert store.load("big") is None
    cur = store.load("k")
    assert cur is not None
    with pytest.raises(errors.StoreError, match="signed 64-bit"):
        store.compare_and_swap("k", cur, cur.replace(fence=2**64 - 1))
    assert not store.compare_and_swap("k", cur.replace(sequence=2**64 - 1), cur)
    assert store.load("k") == rec


def test_unencodable_task_writes_nothing(store: SQLiteStore) -> None:
    rec = TaskState(key="k", status="pending", sequence=1, task=float("nan"))
    with pytest.raises(errors.EncodeError, match=r"^json: unsupported value: NaN$"):
        store.compare_and_swap("k", None, rec)
    assert store.load("k") is None


def test_range_is_sorted_by_utf8_bytes(store: SQLiteStore) -> None:
    keys = ["z", "a", "B", "é", "\uffff", "𝄞", "a/b", "a b", "aa", "~"]
    for key in keys:
        assert store.compare_and_swap(key, None, TaskState(key=key, status="pending", sequence=1))
    assert [r.key for r in store.range()] == sorted(keys, key=byte_order)


def test_range_is_a_snapshot(store: SQLiteStore) -> None:
    for i in range(50):
        store.compare_and_swap(f"k{i:02d}", None, TaskState(key=f"k{i:02d}", status="pending"))
    view = store.range()
    first = next(view)
    store.compare_and_swap("zz", None, TaskState(key="zz", status="pending"))
    assert [first.key, *(r.key for r in view)] == [f"k{i:02d}" for i in range(50)]


def test_by_status_orders_by_created_at_instant_then_key(store: SQLiteStore) -> None:
    # Text order of these times differs from their instant order ('.' < 'Z', offsets).
    times = {
        "k1": "2024-01-01T00:00:00.5Z",
        "k2": "2024-01-01T00:00:00Z",
        "k3": "2024-01-01T01:00:00+02:00",  # 23:00 the day before
        "k4": "2024-01-01T00:00:00Z",
        "k0": "2024-01-01T00:00:00Z",
    }
    for key, text in times.items():
        t = Instant.parse(text)
        store.compare_and_swap(key, None, TaskState(key=key, status="pending", created_at=t))
    store.compare_and_swap("done", None, TaskState(key="done", status="completed"))
    got = [r.key for r in store.by_status(["pending", "claimed"])]
    assert got == ["k3", "k0", "k2", "k4", "k1"]
    assert [r.key for r in store.by_status(["completed"])] == ["done"]
    assert store.by_status([]) == []


# -- batch ---------------------------------------------------------------------


def test_batch_commits_together_and_is_durable(db: Path) -> None:
    with SQLiteStore(db) as store:
        ledger = Ledger(store)
        other = sqlite3.connect(db)
        with store.batch():
            for i in range(20):
                ledger.admit(A, f"k{i}", 1, i, T0)
            assert store.load("k3") is not None  # reads inside see the writes
            assert other.execute("SELECT count(*) FROM ledger_tasks").fetchone()[0] == 0
        assert other.execute("SELECT count(*) FROM ledger_tasks").fetchone()[0] == 20
        other.close()
    with SQLiteStore(db) as store:
        assert [r.task for r in store.range()] == sorted(range(20), key=lambda i: f"k{i}")


def test_batch_rolls_back_on_exception(store: SQLiteStore) -> None:
    ledger = Ledger(store)
    ledger.admit(A, "keep", 1, None, T0)
    with pytest.raises(RuntimeError), store.batch():
        ledger.admit(A, "gone", 1, None, T0)
        ledger.claim(A, "keep", "o", HOUR, T0)
        raise RuntimeError("boom")
    assert store.load("gone") is None
    keep = store.load("keep")
    assert keep is not None and keep.status == "pending"
    with store.batch():  # usable afterwards
        ledger.admit(A, "after", 1, None, T0)
    assert store.load("after") is not None


def test_batch_is_reentrant_with_savepoints(store: SQLiteStore) -> None:
    ledger = Ledger(store)
    with store.batch():
        ledger.admit(A, "outer", 1, None, T0)
        with store.batch():
            ledger.admit(A, "inner", 1, None, T0)
        with pytest.raises(ValueError), store.batch():
            ledger.admit(A, "inner-failed", 1, None, T0)
            raise ValueError
        with store.batch(), store.batch():
            ledger.admit(A, "deep", 1, None, T0)
    assert [r.key for r in store.range()] == ["deep", "inner", "outer"]


def test_batch_blocks_other_writers_until_it_ends(db: Path) -> None:
    with SQLiteStore(db) as a, SQLiteStore(db) as b:
        order: list[str] = []
        with a.batch():
            Ledger(a).admit(A, "first", 1, None, T0)

            def write_b() -> None:
                Ledger(b).admit(A, "second", 1, None, T0)
                order.append("b")

            thread = threading.Thread(target=write_b)
            thread.start()
            time.sleep(0.3)
            order.append("a")
        thread.join()
        assert order == ["a", "b"]
        assert [r.key for r in b.range()] == ["first", "second"]


# -- history --------------------------------------------------------------------


def test_history_round_trip_filter_and_pages(db: Path) -> None:
    entries = [
        HistoryEntry(
            f"2024-01-01T00:00:{i % 60:02d}Z",
            f"actor{i}",
            "ledger.admitted",
            f"k{i % 3}",
            i,
            f"key k{i % 3} admitted at sequence {i}",
        )
        for i in range(2500)
    ]
    with SQLiteStore(db) as store:
        store.append_history(entries[:10])
        with pytest.raises(RuntimeError), store.batch():
            store.append_history([entries[10]])
            raise RuntimeError
        store.append_history(entries[10:])
        assert list(store.read_history()) == entries
        assert list(store.read_history("k1")) == [e for e in entries if e.key == "k1"]
        assert list(store.read_history("missing")) == []
    with SQLiteStore(db) as store:
        assert len(list(store.read_history())) == 2500


# -- injection -------------------------------------------------------------------


def test_hostile_text_round_trips_verbatim_through_every_operation(
    store: SQLiteStore, db: Path
) -> None:
    ledger = Ledger(store)
    keys = list(HOSTILE_TEXTS)
    for i, text in enumerate(keys):
        needs = (keys[i - 1],) if i else ()
        assert ledger.admit(text, text, 1, {text: [text]}, T0, *needs)
        assert ledger.claim(text, text, text, HOUR, T0) == 1
        ledger.renew(text, text, text, 1, HOUR, T0 + HOUR)
        ledger.release(text, text, text, 1, T0 + HOUR)
        assert ledger.claim(text, text, text, HOUR, T0 + HOUR) == 2
        assert ledger.takeover(text, text, text, HOUR, T0 + 3 * HOUR) == 3
        ledger.complete(text, text, text, 3, "completed", T0 + 3 * HOUR)
        assert ledger.blocked(text) is None
        store.append_history([HistoryEntry(str(T0), text, "ledger.completed", text, 3, text)])
    for i, text in enumerate(keys):
        rec = ledger.state(text)
        assert rec is not None
        assert (rec.key, rec.owner, rec.created_by, rec.updated_by) == (text, text, text, text)
        assert rec.task == {text: [text]}
        assert rec.needs == ((keys[i - 1],) if i else None)
        assert [e.data for e in store.read_history(text)] == [text]
    assert sorted(r.key for r in store.range()) == sorted(keys)
    assert {r.key for r in store.by_status(["completed"])} == set(keys)
    # A failed task with a hostile key blocks its dependant, which names it verbatim.
    bad, child = keys[0] + " failed", keys[1] + " child"
    ledger.admit(bad, bad, 1, None, T0)
    ledger.admit(child, child, 1, None, T0, bad)
    ledger.complete(bad, bad, bad, ledger.claim(bad, bad, bad, HOUR, T0), "failed", T0)
    assert ledger.blocked(child) == bad
    snap = ledger.snapshot()
    assert snap.tasks is not None and len(snap.tasks) == len(keys) + 2
    assert table_info(db) and table_info(db, "ledger_history")
    assert len(raw_rows(db)) == len(keys) + 2


# -- errors and lifecycle ----------------------------------------------------------


def test_missing_directory_is_a_one_line_store_error(tmp_path: Path) -> None:
    with pytest.raises(errors.StoreError, match="directory exists") as info:
        SQLiteStore(tmp_path / "no" / "such" / "dir.db")
    assert "\n" not in str(info.value) and info.value.exit_code == 9


@pytest.mark.parametrize("name", ["a.db", "we?ird #1 %20.db", "rel.db"])
def test_an_open_that_may_not_create_never_creates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """`open_store(create=False)` (a read command, each refresh of `watch`):
    a file deleted after its check that it is there (the check skipped here)
    is a NoStoreError, never an empty database made at the path."""
    from ledger_cli import stores

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stores, "_require", lambda scheme, target: None)
    path = Path(name) if name == "rel.db" else tmp_path / name
    with pytest.raises(errors.NoStoreError, match="no store at") as info:
        stores.open_store(f"sqlite:{path}", create=False)
    assert info.value.exit_code == 9 and list(tmp_path.iterdir()) == []
    SQLiteStore(path).close()
    store = stores.open_store(f"sqlite:{path}", create=False)
    try:
        assert store.load("k") is None
    finally:
        store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(name).name]


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(errors.StoreError, match="not a database"):
        SQLiteStore(path)
    assert path.read_bytes() == b"this is not sqlite" * 100  # refused, not reset


def test_corrupt_row_is_a_store_error_naming_the_key(store: SQLiteStore, db: Path) -> None:
    store.compare_and_swap("k", None, TaskState(key="k", status="pending"))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE ledger_tasks SET needs = 'nope' WHERE key = 'k'")
    conn.commit()
    conn.close()
    with pytest.raises(errors.StoreError, match=r"'k'.*needs"):
        store.load("k")


def test_unencodable_key_is_a_store_error(store: SQLiteStore) -> None:
    # U+D800 stands for no byte; "\udcff" is the byte 0xFF (test_go_text.py).
    with pytest.raises(errors.StoreError):
        store.compare_and_swap("\ud800", None, TaskState(key="\ud800", status="pending"))


def test_closed_store_refuses(db: Path) -> None:
    store = SQLiteStore(db)
    store.close()
    store.close()  # idempotent
    with pytest.raises(errors.StoreError, match="closed"):
        store.load("k")


def test_memory_database_works() -> None:
    with SQLiteStore(":memory:") as store:
        assert Ledger(store).admit(A, "k", 1, None, T0)
        assert [r.key for r in store.range()] == ["k"]


def test_reopen_keeps_everything(db: Path) -> None:
    with SQLiteStore(db) as store:
        ledger = Ledger(store)
        ledger.admit(A, "k", 1, {"x": 1}, T0)
        ledger.claim(A, "k", "o", HOUR, T0)
        before = list(store.range())
    with SQLiteStore(db) as store:
        assert list(store.range()) == before


@pytest.mark.parametrize("in_batch", [False, True], ids=["alone", "in a batch"])
def test_history_rows_holding_raw_bytes_go_in_once_and_in_order(
    store: SQLiteStore, in_batch: bool
) -> None:
    # A row bound as bytes after the others were bound as text: none twice.
    texts = ["first", "b\udcffd", "last"]
    entries = [HistoryEntry(str(T0), A, "ledger.completed", "k", 1, t) for t in texts]
    if in_batch:
        with store.batch():
            store.append_history(entries)
    else:
        store.append_history(entries)
    assert [e.data for e in store.read_history("k")] == texts


def test_a_failing_history_row_in_a_batch_leaves_none_of_its_rows(store: SQLiteStore) -> None:
    good = HistoryEntry(str(T0), A, "ledger.completed", "k", 1, "good")
    bad = HistoryEntry(str(T0), A, "ledger.completed", "k", 1, "\ud800")  # stands for no byte
    with store.batch():
        with pytest.raises(errors.StoreError):
            store.append_history([good, bad])
        store.append_history([good])
    assert [e.data for e in store.read_history("k")] == ["good"]
