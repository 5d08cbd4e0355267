"""A record at the largest fence its store holds (docs/design.md §2.3, §2.9;
docs/stores.md): Go's uint64 (2^64-1) on the JSON store and PostgreSQL,
SQLite's signed INTEGER (2^63-1). Its next claim's fence cannot be stored,
so `claim KEY` refuses it (exit 8), `claim --next` passes it over and hands
out the next ready task, `doctor` notes it, and `restore` refuses to put a
record there, each through the installed `ledger` in a fresh process."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.cli_support import ledger_ok, run_ledger

INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


def _snapshot(fence: int, sequence: int = 1) -> bytes:
    rec = {
        "Key": "big",
        "Status": "pending",
        "Sequence": sequence,
        "Fence": fence,
        "Owner": "",
        "LeaseUntil": "0001-01-01T00:00:00Z",
        "Needs": None,
        "BlockedBy": "",
        "Task": None,
        "Rev": 0,
        "CreatedBy": "t",
        "CreatedAt": "2026-01-01T00:00:00Z",
        "UpdatedBy": "t",
        "UpdatedAt": "2026-01-01T00:00:00Z",
    }
    return json.dumps({"Tasks": [rec]}).encode()


def _passed_over(store: str, fence: int) -> None:
    """`big` (the oldest) at `fence`, the store's largest: claim --next hands
    out `normal`; claim big says why it cannot; doctor notes it (exit 0)."""
    ledger_ok(store, "admit", "normal")
    nxt = run_ledger(store, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert (nxt.returncode, nxt.stdout.split()[:1]) == (0, ["normal"]), nxt.stderr
    again = run_ledger(store, "claim", "big", "--owner", "w", "--lease", "1m")
    message = f"ledger: big is at fence {fence}, the largest this store holds"
    assert again.returncode == 8 and again.stderr.startswith(message), again.stderr
    assert len(again.stderr.splitlines()) == 1
    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    assert f"note: big: at fence {fence}, the largest this store holds" in doctor.stdout


def test_a_record_claimed_up_to_the_largest_fence_is_passed_over(url: str) -> None:
    top = INT64_MAX if url.startswith("sqlite:") else UINT64_MAX
    done = run_ledger(url, "restore", "-", input=_snapshot(top - 1))
    assert done.returncode == 0, done.stderr
    assert ledger_ok(url, "claim", "big", "--owner", "w", "--lease", "1m").strip() == str(top)
    ledger_ok(url, "release", "big", "--owner", "w", "--fence", str(top))
    _passed_over(url, top)


def test_a_row_another_writer_left_at_sqlites_largest_fence(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    assert run_ledger(db, "restore", "-", input=_snapshot(5)).returncode == 0
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE ledger_tasks SET fence = ? WHERE key = 'big'", (INT64_MAX,))
    conn.close()
    _passed_over(str(db), INT64_MAX)


def test_restore_into_sqlite_refuses_numbers_it_cannot_hold(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    refusals = {
        _snapshot(INT64_MAX): "Fence 9223372036854775807 leaves no fence for the task's next claim",
        _snapshot(UINT64_MAX - 1): "Fence 18446744073709551614 leaves no fence",
        _snapshot(1, INT64_MAX + 1): "Sequence 9223372036854775808 is more than this store holds",
    }
    for data, why in refusals.items():
        done = run_ledger(db, "restore", "-", input=data)
        assert (done.returncode, done.stdout) == (8, ""), done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith(f"ledger: snapshot entry 0: {why}"), line
        assert "SQLite's signed 64-bit INTEGER holds at most 9223372036854775807" in line
        assert not db.exists()  # nothing written, not even a new database
    done = run_ledger(db, "restore", "-", input=_snapshot(INT64_MAX - 1, INT64_MAX))
    assert done.returncode == 0, done.stderr


def test_cancel_fails_a_claimed_record_at_the_largest_fence(url: str) -> None:
    """Cancel keeps such a record's fence (the next cannot be stored) and
    still fails it: its dependents are blocked and its holder is refused."""
    top = INT64_MAX if url.startswith("sqlite:") else UINT64_MAX
    done = run_ledger(url, "restore", "-", input=_snapshot(top - 1))
    assert done.returncode == 0, done.stderr
    ledger_ok(url, "admit", "after", "--needs", "big")
    assert ledger_ok(url, "claim", "big", "--owner", "w", "--lease", "1m").strip() == str(top)
    cancel = run_ledger(url, "cancel", "big")
    assert cancel.returncode == 0, cancel.stderr
    held = run_ledger(url, "complete", "big", "--owner", "w", "--fence", str(top))
    assert held.returncode != 0 and len(held.stderr.splitlines()) == 1, held
    rows = {r["Key"]: r for r in json.loads(ledger_ok(url, "list", "--json"))}
    assert (rows["big"]["Status"], rows["big"]["Fence"]) == ("failed", top)
    assert rows["after"]["Status"] == "blocked"
