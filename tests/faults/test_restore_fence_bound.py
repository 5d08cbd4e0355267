"""A record restored over a lost one never hands out a fence the lost one
granted (docs/design.md §3.2, §2.9): `ledger restore` inserts each record at
or above the highest fence its key's history shows, so the worker still
holding the lost record's lease stays fenced off (exit 5), on every durable
store (the `url` fixture; PostgreSQL skips when unreachable, as elsewhere).
Then the same area on the JSON store: the same restore run again after the
fence floor rose still finishes, and doctor's remedy for a damaged record
file names the drop that has to come before a restore. Every command is a
fresh `ledger` process (tests/cli_support.py)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_sane

NOW = "2026-03-04T05:06:07Z"
HELD = 4
"""The fence worker `old` holds when x's record is lost."""


def _ledger(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_sane(url, "--now", NOW, "--actor", "t", *args)


def _ok(url: str, *args: str) -> str:
    res = _ledger(url, *args)
    assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res.stdout


def _record_file(url: str, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return Path(url.removeprefix("json:")) / "records" / digest[:2] / f"{digest}.json"


def _lose(url: str, key: str) -> None:
    """The record of `key` goes, its history stays: its file deleted (JSON),
    its row deleted by hand (SQL)."""
    if url.startswith("json:"):
        _record_file(url, key).unlink()
    elif url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:")) as conn:
            assert conn.execute("DELETE FROM ledger_tasks WHERE key = ?", (key,)).rowcount == 1
    else:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("DELETE FROM ledger_tasks WHERE key = %s", (key,)).rowcount == 1


def _held_then_lost(url: str, tmp_path: Path) -> Path:
    """x snapshotted at fence 0, then claimed up to fence HELD by `old`, whose
    lease is live when x's record is lost. The snapshot's path."""
    _ok(url, "admit", "x")
    snap = tmp_path / "x.snap"
    _ok(url, "snapshot", "-o", str(snap))
    for fence in range(1, HELD):
        assert _ok(url, "claim", "x", "--owner", "old", "--lease", "1h") == f"{fence}\n"
        _ok(url, "release", "x", "--owner", "old", "--fence", str(fence))
    assert _ok(url, "claim", "x", "--owner", "old", "--lease", "1h") == f"{HELD}\n"
    _lose(url, "x")
    return snap


def _fence(url: str, key: str) -> int:
    fence: int = json.loads(_ok(url, "--json", "state", key))["Fence"]
    return fence


def test_a_restored_record_starts_above_every_fence_its_history_shows(
    url: str, tmp_path: Path
) -> None:
    snap = _held_then_lost(url, tmp_path)
    assert _ok(url, "restore", str(snap)) == "restored 1 record\n"
    assert _fence(url, "x") == HELD
    log = json.loads(_ok(url, "--json", "log", "x"))
    restored = [entry["fence"] for entry in log if entry["event"] == "ledger.restored"]
    assert restored == [HELD]  # the line carries the record's own fence
    # The same restore run again: x holds the snapshot's record as inserted.
    assert _ok(url, "restore", str(snap)) == "restored 1 record (1 already there)\n"
    assert _ok(url, "claim", "x", "--owner", "new", "--lease", "1h") == f"{HELD + 1}\n"
    for verb, extra in (("complete", ()), ("renew", ("--lease", "1h")), ("release", ())):
        res = _ledger(url, verb, "x", "--owner", "old", "--fence", str(HELD), *extra)
        assert res.returncode == 5, (verb, res.stdout, res.stderr)
        assert res.stderr.startswith("ledger: fence token is stale"), res.stderr
    state = json.loads(_ok(url, "--json", "state", "x"))
    assert (state["Status"], state["Owner"], state["Fence"]) == ("claimed", "new", HELD + 1)


LIBRARY_RESTORE = """
import sys
from ledger_cli import Ledger, Snapshot, open_store
store = open_store(sys.argv[1])
Ledger(store).restore(Snapshot.decode(open(sys.argv[2], "rb").read()))
getattr(store, "close", lambda: None)()
"""


def test_the_library_restore_raises_the_fence_as_the_command_does(url: str, tmp_path: Path) -> None:
    """`Ledger.restore` (a fresh Python process) puts a lost record back at
    the highest fence its history shows, as `ledger restore` does."""
    snap = _held_then_lost(url, tmp_path)
    lib = subprocess.run(
        [sys.executable, "-c", LIBRARY_RESTORE, url, str(snap)], capture_output=True, text=True
    )
    assert lib.returncode == 0, lib.stderr
    assert _fence(url, "x") == HELD
    assert _ok(url, "claim", "x", "--owner", "new", "--lease", "1h") == f"{HELD + 1}\n"
    res = _ledger(url, "complete", "x", "--owner", "old", "--fence", str(HELD))
    assert res.returncode == 5, (res.stdout, res.stderr)


def _damage(url: str, key: str) -> None:
    """One byte of the record file changed: its checksum fails."""
    path = _record_file(url, key)
    data = path.read_bytes()
    assert data.count(b'"Owner":""') == 1
    path.write_bytes(data.replace(b'"Owner":""', b'"Owner":"z"'))


def test_the_same_restore_finishes_after_a_drop_raised_the_floor(tmp_path: Path) -> None:
    """Snapshot a (claimed, fence 1), b and c; c's file damaged and dropped:
    the floor rises to 1. The snapshot restores c and counts a and b, which
    the store holds as the snapshot does (b at fence 0, under the floor: it
    was there before the floor rose), then again all three."""
    url = f"json:{tmp_path / 'store'}"
    for key in ("a", "b", "c"):
        _ok(url, "admit", key)
    _ok(url, "claim", "a", "--owner", "w", "--lease", "1h")
    snap = tmp_path / "abc.snap"
    _ok(url, "snapshot", "-o", str(snap))
    _damage(url, "c")
    assert "raised the fence floor from 0 to 1" in _ok(url, "doctor", "--fix", "--drop-damaged")
    assert _ok(url, "restore", str(snap)) == "restored 3 records (2 already there)\n"
    assert _ok(url, "restore", str(snap)) == "restored 3 records (3 already there)\n"
    assert [_fence(url, key) for key in ("a", "b", "c")] == [1, 0, 1]


def test_doctor_names_the_drop_a_damaged_record_needs_before_its_restore(
    tmp_path: Path,
) -> None:
    """`restore` refuses while the damaged file is there (exit 9): doctor's
    remedy is the drop first, then the restore, which then works."""
    url = f"json:{tmp_path / 'store'}"
    _ok(url, "admit", "a")
    snap = tmp_path / "a.snap"
    _ok(url, "snapshot", "-o", str(snap))
    _damage(url, "a")
    doctor = _ledger(url, "doctor")
    assert doctor.returncode == 9
    problem = next(line for line in doctor.stdout.splitlines() if "corrupt record" in line)
    drop, restore = problem.find("ledger doctor --fix --drop-damaged"), problem.find("restore")
    assert -1 < drop < restore, problem
    refused = _ledger(url, "restore", str(snap))
    assert refused.returncode == 9 and "corrupt record" in refused.stderr, refused.stderr
    _ok(url, "doctor", "--fix", "--drop-damaged")
    assert _ok(url, "restore", str(snap)) == "restored 1 record\n"
    assert _ok(url, "doctor").endswith("no problems found\n")
