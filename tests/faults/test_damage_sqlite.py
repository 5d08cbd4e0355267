"""The damage matrix's SQLite rows: a database file truncated,
with garbage pages, that is not SQLite at all, or emptied; then the commands
a person runs, each as a fresh `ledger` process (tests/cli_support.py).

Checked for every case: never exit 70 nor a traceback; exit 9 comes with one
line on stderr naming the file; a read that answers (SQLite may never touch
a damaged page, such as an index the query does not use) gives the healthy
store's answer; `doctor` reports the damage (exit 9); and the file is not
rewritten unless a write was accepted (exit 0). An emptied file is read as no
store at all (exit 9), never as an empty queue; a write may create a new
database in it, as in a file made for one (`mktemp`).

A missing `-wal` is not a row: SQLite cannot tell a lost write-ahead log from
one that was checkpointed (docs/reliability.md, known limits).
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"
PAGE = 4096

READS = [
    ("state", "p2"),
    ("list", "--json"),
    ("stats", "--json"),
    ("log",),
    ("output", "p1"),
    ("snapshot",),
]
WRITES = [
    ("claim", "--next", "--owner", "m", "--lease", "60s"),
    ("run", "--next", "--owner", "m", "--lease", "60s", "--", "true"),
    ("admit", "newkey", "--task", "{}"),
    ("complete", "held", "--owner", "w", "--fence", "1"),
]


def _ledger(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ledger(f"sqlite:{db}", "--now", NOW, "--actor", "matrix", *args)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database with ready tasks, a dependent, a run's kept output and a
    held lease, checkpointed into the main file (no -wal left)."""
    db = tmp_path_factory.mktemp("sqlite-damage") / "t.db"
    for args in (
        *(("admit", key, "--task", '{"n":1}') for key in ("p1", "p2", "p3", "p4")),
        ("admit", "child", "--needs", "p2"),
        ("run", "p1", "--owner", "w", "--lease", "60s", "--", "echo", "hi"),
        ("admit", "held"),
        ("claim", "held", "--owner", "w", "--lease", "1h"),
    ):
        res = _ledger(db, *args)
        assert res.returncode == 0, (args, res.stderr)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the whole database in one file
    conn.close()
    assert not Path(f"{db}-wal").exists()
    return db


def _garbage(pages: range, seed: int) -> Callable[[bytes], bytes]:
    def damage(data: bytes) -> bytes:
        rnd = random.Random(seed)
        out = bytearray(data)
        for page in pages:
            at = page * PAGE
            if at < len(out):
                out[at : at + PAGE] = bytes(rnd.randrange(256) for _ in range(PAGE))
        return bytes(out[: len(data)])

    return damage


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "truncated-half": lambda data: data[: len(data) // 2],
    "truncated-header": lambda data: data[:50],
    "truncated-page": lambda data: data[: len(data) - PAGE // 2],
    "garbage-page-2": _garbage(range(1, 2), 1),
    "garbage-page-4": _garbage(range(3, 4), 2),
    "garbage-pages": _garbage(range(1, 9), 3),
    "garbage-header": _garbage(range(0, 1), 4),
    "not-sqlite": lambda data: random.Random(5).randbytes(len(data)),
    "text": lambda data: b'{"this is": "not a database"}\n',
    "empty": lambda data: b"",
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_sqlite_damage(template: Path, tmp_path: Path, damage: str) -> None:
    healthy = tmp_path / "healthy.db"
    shutil.copyfile(template, healthy)
    db = tmp_path / "t.db"
    damaged = DAMAGES[damage](template.read_bytes())
    db.write_bytes(damaged)

    codes: list[int] = []

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        res = _ledger(db, *args)
        codes.append(res.returncode)
        where = f"{damage}: ledger {' '.join(args)} -> {res.returncode}: {res.stderr!r}"
        assert res.returncode != 70, where
        assert "Traceback" not in res.stderr + res.stdout, where
        if res.returncode == 9 and args[0] != "doctor":
            assert len(res.stderr.splitlines()) == 1, where
            assert str(db) in res.stderr, where
        return res

    for args in READS:
        res = run(*args)
        assert res.returncode in (0, 9), (damage, args, res.returncode, res.stderr)
        if res.returncode == 0:  # an answer is the healthy store's answer
            want = _ledger(healthy, *args)
            assert (res.stdout, res.returncode) == (want.stdout, want.returncode), (damage, args)
    doctor = run("doctor")
    assert doctor.returncode == 9, (damage, doctor.stdout, doctor.stderr)
    assert db.read_bytes() == damaged, f"{damage}: a read changed the file"
    accepted = False
    for args in WRITES:
        res = run(*args)
        accepted = accepted or res.returncode == 0
        if damage != "empty":
            assert res.returncode in (0, 9), (damage, args, res.returncode, res.stderr)
    fixed = run("doctor", "--fix")
    if damage != "empty":
        assert fixed.returncode == 9, (damage, fixed.stdout)
    if not accepted and damage != "empty":
        assert db.read_bytes() == damaged, f"{damage}: the file was rewritten"
    print(f"{damage}: exits {sorted(codes)}")  # the figures (-s)


def test_template_is_healthy(template: Path) -> None:
    res = _ledger(template, "--json", "doctor")
    assert res.returncode == 0, res.stdout
    assert json.loads(res.stdout)["records"] == 6


@pytest.mark.parametrize("column", ["sequence", "fence", "rev"])
def test_a_negative_number_in_a_row_is_damage_not_a_hang(
    template: Path, tmp_path: Path, column: str
) -> None:
    """A row no writer makes (its numbers are unsigned): a claim of it could
    never match it in its compare-and-swap, and retried for ever."""
    db = tmp_path / "t.db"
    shutil.copy(template, db)
    conn = sqlite3.connect(db)
    conn.execute(f"UPDATE ledger_tasks SET {column} = -5 WHERE key = 'p2'")
    conn.commit()
    conn.close()
    for args in (("claim", "p2", "--owner", "m", "--lease", "60s"), ("state", "p2"), ("doctor",)):
        res = _ledger(db, *args)  # run_ledger bounds each process's time
        assert res.returncode == 9, (args, res.returncode, res.stderr)
        assert f"unreadable {column} column (-5 is negative)" in res.stderr + res.stdout, args


def test_a_status_this_ledger_does_not_know_is_not_left_out_of_stats(
    template: Path, tmp_path: Path
) -> None:
    """A row with a status no release of this ledger writes (the Go service's
    table is shared): `stats` would count every other row and look whole."""
    db = tmp_path / "t.db"
    shutil.copy(template, db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE ledger_tasks SET status = 'paused' WHERE key = 'p3'")
    conn.commit()
    conn.close()
    for args in (("stats",), ("--json", "stats")):
        res = _ledger(db, *args)
        assert res.returncode == 9, (args, res.stdout)
        message = (
            'ledger: 1 stored records have a status this ledger does not know, such as "paused"; '
            "ledger doctor names them"
        )
        assert res.stderr.splitlines() == [message], args
    doctor = _ledger(db, "doctor")
    assert doctor.returncode == 9 and 'unknown status "paused"' in doctor.stdout


@pytest.mark.parametrize("name", ["ledger_history_key", "ledger_ready_order", "sqlite_sequence"])
def test_doctor_runs_sqlites_own_check_of_every_page(
    template: Path, tmp_path: Path, name: str
) -> None:
    """A zeroed page of an index or of a small table that reading every row
    never touches: `admit` or `log` exit 9 on it, so `doctor` (and `doctor
    --fix`, which cannot repair it) exits 9 naming SQLite's finding."""
    db = tmp_path / "t.db"
    shutil.copy(template, db)
    conn = sqlite3.connect(db)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    conn.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * PAGE : root * PAGE] = bytes(PAGE)
    db.write_bytes(bytes(data))
    for args in (("doctor",), ("doctor", "--fix")):
        res = _ledger(db, *args)
        assert res.returncode == 9, (args, res.stdout, res.stderr)
        lines = res.stdout.splitlines()
        found = [line for line in lines if "SQLite's quick_check:" in line]
        assert found and all(line.startswith(f"problem: sqlite store {db}") for line in found)
        assert any(f"Page {root}" in line or "malformed" in line for line in found), lines
        assert "restore it from a backup" in res.stdout, lines
        assert "fixed:" not in res.stdout, lines
    res = _ledger(db, "--json", "doctor")
    assert res.returncode == 9 and json.loads(res.stdout)["problems"], res.stdout


def test_drop_damaged_deletes_no_row_and_asks_for_a_repair_in_place(
    template: Path, tmp_path: Path
) -> None:
    """A held lease's row that does not decode: no command deletes it
    (`--drop-damaged` drops nothing on SQL), and the error asks for a repair
    in place, not a deletion: a deleted row frees its key, whose next admit
    starts at fence 0 and would hand out the holder's fence a second time."""
    db = tmp_path / "t.db"
    shutil.copy(template, db)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE ledger_tasks SET needs = '{{' WHERE key = 'held'")
    conn.commit()
    conn.close()
    res = _ledger(db, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 9, res.stdout
    assert "unreadable needs column" in res.stdout
    assert "repair that row in place" in res.stdout and "or delete" not in res.stdout
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT status, fence FROM ledger_tasks WHERE key = 'held'").fetchall()
    conn.close()
    assert rows == [("claimed", 1)]
