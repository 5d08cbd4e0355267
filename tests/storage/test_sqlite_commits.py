"""Write transactions per command on the SQLite store, pinned as
tests/storage/test_fsync_counts.py pins the JSON store's syncs: counted from
the driver's statement trace, never timed.

With `synchronous=FULL` in WAL mode each transaction that writes is one fsync
of the log at its commit (a transaction that writes nothing writes no log);
so these are the store's syncs per command. `ledger run` starts the first
attempt in the claim's transaction and notes the pid only for a command that
outlives a poll (stores/sql/attempts.py): before, the start was a
transaction of its own.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.stores.sql.sqlite import SQLiteStore
from tests.faults_support import invoke

RUN_NEXT = 2
"""`ledger run --next -- true`: the claim (with the attempt's start) and the
completion (with the attempt's end) (was 3: the start on its own)."""
DRAIN_PER_TASK = 1
"""`ledger run --next --drain -- true`, per task: each outcome also claims
the next task and starts its attempt (was 2: the start on its own)."""


class WriteCounter:
    """Counts the transactions that wrote, over every connection opened."""

    def __init__(self) -> None:
        self.writes = 0
        self._open = False
        self._wrote = False

    def statement(self, sql: str) -> None:
        word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if word == "BEGIN":
            self._open, self._wrote = True, False
        elif word in ("COMMIT", "END"):
            self.writes += self._wrote
            self._open = False
        elif word == "ROLLBACK" and not sql.upper().startswith("ROLLBACK TO"):
            self._open = False
        elif word in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            if self._open:
                self._wrote = True
            else:
                self.writes += 1  # a statement of its own: its own commit


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteCounter]:
    counting = WriteCounter()
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(counting.statement)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    yield counting


def _admit(store: Path, keys: list[str]) -> None:
    for key in keys:
        assert invoke(store, "admit", key).code == 0


def test_run_next_commits_twice(counter: WriteCounter, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    _admit(store, ["a"])
    counter.writes = 0
    res = invoke(store, "run", "--next", "--owner", "w", "--lease", "60s", "--", "true")
    assert res.code == 0, res.stderr
    assert counter.writes == RUN_NEXT


def test_a_drain_commits_once_per_task(counter: WriteCounter, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    keys = [f"k{i}" for i in range(5)]
    _admit(store, keys)
    counter.writes = 0
    argv = ("run", "--next", "--drain", "--owner", "w", "--lease", "60s", "--", "true")
    res = invoke(store, *argv)
    assert res.code == 0, res.stderr
    assert counter.writes == 1 + DRAIN_PER_TASK * len(keys)
    db = SQLiteStore(store)
    try:
        for key in keys:
            rec = db.load(key)
            assert rec is not None and rec.status == "completed"
    finally:
        db.close()


def test_a_command_that_outlives_a_poll_sees_its_pid_noted(tmp_path: Path) -> None:
    """The attempt started with the claim (pid 0) gets the command's pid while
    the command runs, once it outlives the supervisor's first poll."""
    store = tmp_path / "s.db"
    _admit(store, ["a"])
    script = (
        "import os, sqlite3, sys, time\n"
        f"db = sqlite3.connect({str(store)!r})\n"
        "for _ in range(500):\n"
        "    row = db.execute('SELECT pid FROM ledger_attempts WHERE key = ?', ('a',)).fetchone()\n"
        "    if row is not None and row[0] == os.getpid():\n"
        "        sys.exit(0)\n"
        "    time.sleep(0.01)\n"
        "sys.exit(3)\n"
    )
    res = invoke(
        store, "run", "a", "--owner", "w", "--lease", "60s", "--", sys.executable, "-c", script
    )
    assert res.code == 0, res.stderr
    db = SQLiteStore(store)
    try:
        rec = db.load("a")
        assert rec is not None and rec.status == "completed"
    finally:
        db.close()
