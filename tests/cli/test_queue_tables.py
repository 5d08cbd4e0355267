"""A store whose queue side tables were never made (docs/design.md §3.3, §8.7):
SQLite makes `ledger_queue`, `ledger_limit` and `ledger_revoked` at the first
write of each, so a fresh store, an older ledger_cli's file and the Go
service's file have none. Every read of them takes a missing table as empty
(every task in `default`, no limit, no revoked lease) and writes nothing;
`claim --next --queue default` claims as on a store that has them.

Fresh processes of the installed CLI, on every store (`url`) and on SQLite
files without the tables.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.cli_support import T0, run_ledger
from tests.cli_support import ledger_ok as ok
from tests.go_support import go_db, go_row

QUEUE_TABLES = {"ledger_queue", "ledger_limit", "ledger_revoked"}
LEASE = ("--owner", "w", "--lease", "1m")


def test_claim_and_run_next_queue_default_on_a_store_with_default_tasks_only(url: str) -> None:
    ok(url, "--now", T0, "admit", "a")
    assert ok(url, "--now", T0, "claim", "--next", "--queue", "default", *LEASE) == "a 1\n"
    ok(url, "--now", T0, "release", "a", "--owner", "w", "--fence", "1")
    assert ok(url, "--now", T0, "claim", "--next", "--queue", "db,default", *LEASE) == "a 2\n"
    ok(url, "--now", T0, "release", "a", "--owner", "w", "--fence", "2")
    res = run_ledger(url, "run", "--next", "--drain", "--queue", "default", *LEASE, "--", "true")
    assert res.returncode == 0, res.stderr
    assert ok(url, "list", "--status", "completed", "--jsonl").count("\n") == 1


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return {str(name) for (name,) in rows}


def _reads_find_no_queue_tables(store: str, path: Path) -> None:
    """The queue reads answer from the missing tables as empty, and write none."""
    ok(store, "list")  # the first open migrates a Go service's file (our other tables)
    before = _tables(path)
    assert not before & QUEUE_TABLES
    assert ok(store, "list", "--queue", "default", "--jsonl").count("\n") == 1
    assert ok(store, "list", "--queue", "db", "--jsonl") == ""
    assert "default" in ok(store, "--json", "stats", "--queue", "default")
    assert json.loads(ok(store, "--json", "limit")) == [
        {"queue": "default", "limit": None, "held": 0}
    ]
    res = run_ledger(store, "claim", "--next", "--queue", "db", *LEASE)
    assert res.returncode == 7, res.stderr  # nothing ready in `db`
    assert _tables(path) == before  # read-only: no table made
    assert ok(store, "claim", "--next", "--queue", "db,default", *LEASE).split()[0] == "a"
    assert _tables(path) == before


def test_a_fresh_sqlite_store_reads_its_missing_queue_tables_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    store = f"sqlite:{path}"
    ok(store, "admit", "a")
    _reads_find_no_queue_tables(store, path)


def test_a_go_service_file_reads_its_missing_queue_tables_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "go.db"
    conn = go_db(path)
    go_row(conn, key="a", status="pending")
    conn.close()
    _reads_find_no_queue_tables(f"sqlite:{path}", path)
