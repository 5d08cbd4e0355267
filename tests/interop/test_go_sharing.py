"""What docs/stores.md says about sharing a SQLite database with the Go
service, where no other test shows it. The Go `SQLiteStore` is imitated with
plain SQL on its own connection (tests/go_support.py).

- A payload integer beyond 2^53 keeps every digit on our side, but the Go
  service holds Task as generic JSON (numbers as float64): its first write of
  the record re-encodes the payload, rounded, and `ledger` then reads the
  rounded payload, so snapshots before and after differ.
- The ready index's triggers are on the Go service's own `ledger_tasks`:
  every Go write runs them, with its own connection (no function of ours).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from ledger_cli.engine.gojson import encode_value
from tests.cli_support import ledger_cmd, subprocess_env
from tests.go_support import go_connect

BIG = 1234567890123456789
GO_ROUNDED = "1234567890123456800"  # float64(BIG), as Go's encoding/json writes it


def ledger(db: Path, *args: str) -> str:
    res = subprocess.run(
        [*ledger_cmd(), "--store", f"sqlite:{db}", "--actor", "t", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, (res.returncode, res.stdout, res.stderr)
    return res.stdout


def go_claim(conn: sqlite3.Connection, key: str, owner: str, until: str) -> None:
    """The Go store's write of a claim: every column from its decoded record
    (Task a generic JSON value, numbers float64), one conditional UPDATE."""
    seq, status, fence, rev, task = conn.execute(
        "SELECT sequence, status, fence, rev, task FROM ledger_tasks WHERE key = ?", (key,)
    ).fetchone()
    decoded = json.loads(task, parse_int=float)  # Go: interface{} holds float64
    cur = conn.execute(
        "UPDATE ledger_tasks SET status = 'claimed', owner = ?, fence = ?, lease_until = ?,"
        " task = ?, rev = ? WHERE key = ? AND sequence = ? AND status = ? AND fence = ?"
        " AND rev = ?",
        (
            owner,
            fence + 1,
            until,
            encode_value(decoded).encode(),
            rev + 1,
            key,
            seq,
            status,
            fence,
            rev,
        ),
    )
    assert cur.rowcount == 1


def test_a_go_write_rounds_a_payload_integer_beyond_2_53(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    ledger(db, "admit", "big", "--task", json.dumps({"id": BIG}))
    before = ledger(db, "snapshot")
    assert f'"id":{BIG}' in before  # ledger keeps every digit
    go = go_connect(db)
    go_claim(go, "big", "go-worker", "2999-01-01T00:00:00Z")
    go.close()
    task = json.loads(ledger(db, "--json", "state", "big"))["Task"]
    assert json.dumps(task) == f'{{"id": {GO_ROUNDED}}}'
    after = ledger(db, "snapshot")
    assert f'"id":{GO_ROUNDED}' in after and before != after


def test_every_go_write_runs_the_ready_index_triggers(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    ledger(db, "admit", "a")  # opening the store as ledger adds the side tables and triggers
    go = go_connect(db)
    triggers = {
        (name, table)
        for name, table in go.execute(
            "SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'"
        )
    }
    assert {t for t, _ in triggers} >= {
        "ledger_ready_insert",
        "ledger_ready_update",
        "ledger_ready_delete",
    }
    on_tasks = {name for name, table in triggers if table == "ledger_tasks"}
    assert on_tasks >= {"ledger_ready_insert", "ledger_ready_update", "ledger_ready_delete"}
    # Every other trigger sits on a side table of ours, never on another Go table.
    assert {table for _, table in triggers} - {"ledger_tasks"} <= {
        "ledger_ready",
        "ledger_schedule",
        "ledger_due",
    }
    assert go.execute("SELECT key FROM ledger_ready").fetchall() == [("a",)]
    go_claim(go, "a", "go-worker", "2999-01-01T00:00:00Z")  # a Go write: the trigger runs
    go.execute("UPDATE ledger_tasks SET status = 'completed', rev = rev + 1 WHERE key = 'a'")
    assert go.execute("SELECT key FROM ledger_ready").fetchall() == []
    go.close()
