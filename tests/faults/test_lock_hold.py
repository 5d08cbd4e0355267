"""Long batches never starve another writer (docs/design.md §5.4).

`admit --batch` and `restore` commit in short blocks (`cli/chunks.py`). Each
test runs a concurrent writer doing what the Go store does (its INSERT and
conditional UPDATE, plain SQL on the Go schema) during a large batch and a
large restore, and checks, without any timing assertion:
- the writer never fails: its busy timeout is the Go store's 5 s on SQLite
  (lock_timeout 5 s on PostgreSQL), and no block holds the lock that long;
- its writes land *between* the batch's: on SQLite the rowids of the
  writer's rows fall inside the batch's range, which one long transaction
  (the old behaviour) could never produce;
- the batch or restore is complete and exact afterwards.
Sizes (10,000-30,000 lines) keep each command to a few seconds; 200,000-line figures
are `benchmarks/bench_lock_hold.py`'s.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, subprocess_env
from tests.go_support import GO_BUSY_TIMEOUT, go_connect, go_db, go_row

LINES = 30_000
SMALL = 10_000


class Writer:
    """A thread writing like the Go service until stopped; counts and errors."""

    def __init__(self, write: Callable[[int], None]) -> None:
        self._write = write
        self._stop = threading.Event()
        self._started = threading.Event()
        self.writes = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._write(i)
                self.writes += 1
            except Exception as exc:  # the test fails on any
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._started.set()
            i += 1

    def __enter__(self) -> Writer:
        self._thread.start()
        assert self._started.wait(30), "the writer never wrote"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def ledger(store: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_cmd(), "--store", store, "--actor", "batcher", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=600,
        check=False,
    )


def batch_lines(n: int) -> str:
    return "".join(json.dumps({"key": f"task-{i:06d}", "task": {"n": i}}) + "\n" for i in range(n))


def sqlite_go_writer(db: Path, prefix: str) -> Callable[[int], None]:
    """Insert a Go row, then update it with the Go store's conditional UPDATE."""
    conn = go_connect(db, GO_BUSY_TIMEOUT)

    def write(i: int) -> None:
        key = f"{prefix}{i:06d}"
        go_row(conn, key=key, status="pending")
        cur = conn.execute(
            "UPDATE ledger_tasks SET status=?, sequence=?, owner=?, fence=?, lease_until=?,"
            " needs=?, blocked_by=?, task=?, rev=rev+1, updated_at=?, updated_by=?"
            " WHERE key=? AND sequence=? AND status=? AND fence=? AND rev=?",
            ("claimed", 1, "go", 1, "2999-01-01T00:00:00Z", "[]", "", b"null",
             "2024-01-01T00:00:01Z", "go-service", key, 1, "pending", 0, 0),
        )  # fmt: skip
        assert cur.rowcount == 1

    return write


def rowid_interleaved(db: Path, ours: str, theirs: str) -> tuple[int, int]:
    """(writer rows whose rowid lies strictly inside our rows' rowid range, all writer rows)."""
    conn = sqlite3.connect(db)
    try:
        lo, hi = conn.execute(
            "SELECT min(rowid), max(rowid) FROM ledger_tasks WHERE key LIKE ?", (ours + "%",)
        ).fetchone()
        inside, total = conn.execute(
            "SELECT sum(rowid > ? AND rowid < ?), count(*) FROM ledger_tasks WHERE key LIKE ?",
            (lo, hi, theirs + "%"),
        ).fetchone()
    finally:
        conn.close()
    return int(inside or 0), int(total)


def test_sqlite_batch_and_restore_let_a_go_writer_in(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    go_db(db).close()
    store = f"sqlite:{db}"
    with Writer(sqlite_go_writer(db, "go-")) as writer:
        res = ledger(store, "admit", "--batch", "-", stdin=batch_lines(LINES))
    assert res.returncode == 0, res.stderr[:500]
    assert writer.errors == []
    assert res.stdout.count("admitted ") == LINES
    inside, total = rowid_interleaved(db, "task-", "go-")
    assert inside > 0, f"none of the writer's {total} rows landed between the batch's rows"

    snap = tmp_path / "snap.json"
    assert ledger(store, "snapshot", "-o", str(snap)).returncode == 0
    target = tmp_path / "restored.db"
    go_db(target).close()
    with Writer(sqlite_go_writer(target, "go2-")) as writer:
        res = ledger(f"sqlite:{target}", "restore", str(snap))
    assert res.returncode == 0, res.stderr[:500]
    assert writer.errors == []
    inside, total = rowid_interleaved(target, "task-", "go2-")
    assert inside > 0, f"none of the writer's {total} rows landed between the restore's rows"
    conn = sqlite3.connect(target)
    restored = conn.execute("SELECT count(*) FROM ledger_tasks WHERE key LIKE 'task-%'").fetchone()
    conn.close()
    assert restored[0] == LINES and res.stdout.startswith("restored ")


def json_writer(root: Path, prefix: str) -> Callable[[int], None]:
    """Another process's writes on a JSON store: a record and its history line,
    each waiting at most JSON_WAIT for the store's lock."""
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.stores.jsonfile import JsonFileStore

    store = JsonFileStore(root, lock_timeout=JSON_WAIT)
    t0 = Instant.parse("2024-01-01T00:00:00Z")

    def write(i: int) -> None:
        key = f"{prefix}{i:06d}"
        rec = TaskState(key=key, status="pending", sequence=1, created_at=t0, updated_at=t0)
        assert store.compare_and_swap(key, None, rec)
        store.append_history([HistoryEntry(str(t0), "w", "ledger.admitted", key, 0, "")])

    return write


JSON_WAIT = 5.0
"""The JSON writer's lock timeout: the Go store's busy timeout, for symmetry."""


def history_interleaved(root: Path, ours: str, theirs: str) -> tuple[int, int]:
    """(writer lines between our first and last history line, all writer lines)."""
    keys = [json.loads(line)["key"] for line in (root / "history.jsonl").read_text().splitlines()]
    mine = [i for i, k in enumerate(keys) if k.startswith(ours)]
    others = [i for i, k in enumerate(keys) if k.startswith(theirs)]
    return sum(mine[0] < i < mine[-1] for i in others), len(others)


def test_json_batch_and_restore_let_another_writer_in(tmp_path: Path) -> None:
    """The JSON store's lock: a writer waiting at most 5 s never times out during a
    large batch or restore, and its writes land between the blocks'."""
    root = tmp_path / "store"
    assert ledger(f"json:{root}", "admit", "seed").returncode == 0
    with Writer(json_writer(root, "w-")) as writer:
        res = ledger(f"json:{root}", "admit", "--batch", "-", stdin=batch_lines(SMALL))
    assert res.returncode == 0, res.stderr[:500]
    assert writer.errors == []
    assert res.stdout.count("admitted ") == SMALL
    inside, total = history_interleaved(root, "task-", "w-")
    assert inside > 0, f"none of the writer's {total} writes landed between the batch's"

    snap = tmp_path / "snap.json"
    assert ledger(f"json:{root}", "snapshot", "-o", str(snap)).returncode == 0
    target = tmp_path / "restored"
    assert ledger(f"json:{target}", "admit", "seed-2").returncode == 0
    with Writer(json_writer(target, "w2-")) as writer:
        res = ledger(f"json:{target}", "restore", str(snap))
    assert res.returncode == 0, res.stderr[:500]
    assert writer.errors == []
    inside, total = history_interleaved(target, "task-", "w2-")
    assert inside > 0, f"none of the writer's {total} writes landed between the restore's"
    restored = ledger(f"json:{target}", "list", "--jsonl").stdout.count('"task-')
    assert restored == SMALL


def test_restore_says_what_landed_when_a_writer_takes_a_key_meanwhile(tmp_path: Path) -> None:
    """The writer inserts a key of the snapshot while the restore runs: the restore
    stops at it with exit 8 and names exactly what landed (the snapshot's first N)."""
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    with SQLiteStore(tmp_path / "src.db") as src:
        led = Ledger(src)
        with src.batch():
            for i in range(SMALL):
                led.admit("a", f"task-{i:06d}", 1, None, Instant.parse("2024-01-01T00:00:00Z"))
        snap = tmp_path / "snap.json"
        snap.write_bytes(led.snapshot().encode())
    target = tmp_path / "target.db"
    go_db(target).close()
    last = f"task-{SMALL - 1:06d}"
    conn = go_connect(target)

    def take_last_key(i: int) -> None:
        # Wait (as a Go writer would) until the restore has started, then take its last key.
        if conn.execute("SELECT count(*) FROM ledger_tasks").fetchone()[0] > 0:
            go_row(conn, key=last, status="pending")

    with Writer(take_last_key):
        res = ledger(f"sqlite:{target}", "restore", str(snap))
    rows = sqlite3.connect(target).execute("SELECT key FROM ledger_tasks ORDER BY key").fetchall()
    landed = [k for (k,) in rows if k != last]
    if res.returncode == 0:
        pytest.skip("the restore finished before the writer could take its key")
    assert res.returncode == 8, res.stderr
    n = len(landed)
    assert landed == [f"task-{i:06d}" for i in range(n)]  # a prefix, in snapshot order
    message = res.stderr.strip()
    assert f'key "{last}" already has a record' in message
    assert f"restored {n} of {SMALL} records" in message, message
    assert f'keys "task-000000" through "task-{n - 1:06d}"' in message


def test_postgresql_batch_lets_a_lock_timeout_writer_in(tmp_path: Path) -> None:
    """A PostgreSQL writer with lock_timeout 5 s inserts keys the batch is writing
    right now (so it waits for the batch's open transaction) and rows of its
    own: it never times out, and its own rows' transaction ids (`xmin`) fall
    between the batch's first and last, which one transaction cannot give."""
    from tests.stores import KINDS

    with KINDS["postgresql"].place(tmp_path) as url:
        assert ledger(url, "admit", "seed").returncode == 0  # creates the table
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        conn.execute("SET lock_timeout = '5s'")
        insert = (
            "INSERT INTO ledger_tasks (key, status, sequence, created_at, updated_at,"
            " created_by, updated_by) VALUES (%s, 'pending', 1, %s, %s, 'go', 'go')"
            " ON CONFLICT (key) DO NOTHING"
        )
        t = "2024-01-01T00:00:00Z"

        def write(i: int) -> None:
            conn.execute(insert, (f"go-{i:06d}", t, t))
            # Just past what the batch has committed: a key in its open block.
            row = conn.execute("SELECT count(*) FROM ledger_tasks WHERE key LIKE 'task-%'")
            done = row.fetchone()
            conn.execute(insert, (f"task-{(done[0] if done else 0) + 50:06d}", t, t))

        try:
            with Writer(write) as writer:
                res = ledger(url, "admit", "--batch", "-", stdin=batch_lines(SMALL))
            lo, hi = conn.execute(
                "SELECT min(xmin::text::bigint), max(xmin::text::bigint) FROM ledger_tasks"
                " WHERE key LIKE 'task-%' AND created_by = 'batcher'"
            ).fetchone() or (0, 0)
            inside = conn.execute(
                "SELECT count(*) FROM ledger_tasks WHERE key LIKE 'go-%%'"
                " AND xmin::text::bigint > %s AND xmin::text::bigint < %s",
                (lo, hi),
            ).fetchone()
        finally:
            conn.close()
        outcomes = res.stdout.splitlines()
        # A key the writer took first holds another task (null): a conflict (docs/design.md §8.4).
        conflicts = [ln for ln in outcomes if ln.startswith("conflict ")]
        assert res.returncode == (8 if conflicts else 0), res.stderr[:500]
        assert writer.errors == []
        assert inside is not None and inside[0] > 0, "no writer transaction between the batch's"
        assert len(outcomes) == SMALL
        assert all(ln.startswith(("admitted ", "duplicate ", "conflict ")) for ln in outcomes)
