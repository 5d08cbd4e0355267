"""Invalid UTF-8 written by the Go service affects only its own row.

Go strings are bytes, so the Go `SQLiteStore` can write a key, owner, actor,
status, blocker or need that is not valid UTF-8. Each test writes such a row
with plain SQL on the Go schema (tests/go_support.py) beside good rows, then
runs the real `ledger` process: every other record stays usable (`list`,
`snapshot`, `claim --next`), the bad value is shown as Go's encoder shows it
(U+FFFD), `doctor` names the row (exit 9), and an operation on that row by its
exact bytes works byte-exactly and touches no other row.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.stores.sql.attempts import SQLITE_DDL
from tests.cli_support import ledger_cmd, subprocess_env
from tests.go_support import go_db, go_row, raw_rows

FUTURE = "2999-01-01T00:00:00Z"

BAD_ROWS: dict[str, dict[str, Any]] = {
    "key": {"key": b"key-\xff", "status": "pending"},
    "owner": {"key": "bad", "status": "claimed", "owner": b"w-\xff", "fence": 1,
              "lease_until": FUTURE},
    "created_by": {"key": "bad", "status": "pending", "created_by": b"go-\xfe\xfd"},
    "updated_by": {"key": "bad", "status": "pending", "updated_by": b"go-\xc3"},
    "blocked_by": {"key": "bad", "status": "blocked", "blocked_by": b"f-\xff"},
    "status": {"key": "bad", "status": b"pend\xffing"},
    "needs": {"key": "bad", "status": "pending", "needs": b'["dep-\xff"]'},
}  # fmt: skip
"""One bad row per text column; it is the oldest, so `--next` meets it first."""

CLAIMABLE = ("created_by", "updated_by")
"""Bad rows that are ready all the same (their key is fine): `--next` may take them."""


def ledger(db: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """The real `ledger` process; arguments may be bytes (a shell's $'\\xff')."""
    return subprocess.run(
        [*ledger_cmd(), "--store", f"sqlite:{db}", "--actor", "tester", *args],
        capture_output=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )


def text(res: subprocess.CompletedProcess[bytes]) -> str:
    return res.stdout.decode("utf-8")  # strict: what we print is valid UTF-8


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "go.db"
    conn = go_db(db)
    go_row(conn, key="a", status="pending", created_at="2024-01-01T00:00:01Z")
    go_row(conn, key="b", status="pending", created_at="2024-01-01T00:00:02Z")
    conn.close()
    return db


def _add_bad(db: Path, column: str) -> None:
    conn = go_db(db)
    go_row(conn, created_at="2024-01-01T00:00:00Z", **BAD_ROWS[column])
    conn.close()


@pytest.mark.parametrize("column", sorted(BAD_ROWS))
def test_one_bad_column_leaves_every_other_record_usable(store: Path, column: str) -> None:
    _add_bad(store, column)
    before = raw_rows(store)

    listed = ledger(store, "--json", "list")
    shown_key = "key-\ufffd" if column == "key" else "bad"
    if column == "status":
        # An unknown status does not validate: every read names the row and
        # exits 9 (docs/reliability.md); a listing prints the other records.
        assert listed.returncode == 9 and b"stored record 'bad'" in listed.stderr
        assert {r["Key"] for r in json.loads(listed.stdout)} == {"a", "b"}
        assert ledger(store, "snapshot").returncode == 9
        assert ledger(store, "doctor").returncode == 9
        claimed = ledger(store, "--json", "claim", "--next", "--owner", "w", "--lease", "1m")
        assert claimed.returncode == 0 and json.loads(claimed.stdout)["key"] == "a"
        return
    assert listed.returncode == 0, listed.stderr
    records = {r["Key"]: r for r in json.loads(listed.stdout)}
    assert set(records) == {"a", "b", shown_key}
    bad = records[shown_key]
    if column == "owner":
        assert bad["Owner"] == "w-\ufffd"
    if column == "status":
        assert bad["Status"] == "pend\ufffding"
    if column == "needs":
        assert bad["Needs"] == ["dep-\ufffd"]
    if column == "created_by":
        assert bad["CreatedBy"] == "go-\ufffd\ufffd"  # one U+FFFD per bad byte, as Go
    assert b"\\ufffd" in listed.stdout  # Go's encoder escapes it: "key-\ufffd"

    human = ledger(store, "list")
    assert human.returncode == 0, human.stderr
    if column not in ("created_by", "updated_by"):  # columns the table shows
        assert "\ufffd" in text(human)

    snap = ledger(store, "snapshot")
    if column == "status":
        # An unknown status fails Snapshot validation (as in Go): snapshot needs
        # every record, so it refuses, naming the record; nothing else does.
        assert snap.returncode == 8 and b'"bad"' in snap.stderr
    else:
        assert snap.returncode == 0, snap.stderr
        assert len(json.loads(snap.stdout)["Tasks"]) == 3

    doctor = ledger(store, "doctor")
    assert doctor.returncode == 9, doctor.stdout
    problems = [ln for ln in text(doctor).splitlines() if ln.startswith("problem:")]
    assert any(f"record {shown_key}" in p for p in problems), problems

    claimed = ledger(store, "--json", "claim", "--next", "--owner", "w", "--lease", "1m")
    assert claimed.returncode == 0, claimed.stderr
    got = json.loads(claimed.stdout)["key"]
    assert got == ("bad" if column in CLAIMABLE else "a")

    after = raw_rows(store)
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {got.encode()}  # the claim touched its own row only
    if column in CLAIMABLE:
        # Written back byte-exactly: created_by is never rewritten; the rest kept.
        assert after[b"bad"][12] == before[b"bad"][12]  # created_by


def test_a_key_with_invalid_bytes_is_operated_byte_exactly(store: Path) -> None:
    _add_bad(store, "key")
    bad = b"key-\xff"
    before = raw_rows(store)
    # --next never hands it out (no output could name it back) ...
    first = ledger(store, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert text(first).split() == ["a", "1"]
    # ... but its exact bytes name it, as a shell's $'key-\xff' passes them.
    res = ledger(store, "claim", bad, "--owner", "w", "--lease", "1m")
    assert (res.returncode, res.stdout) == (0, b"1\n"), res.stderr
    assert (
        ledger(store, "renew", bad, "--owner", "w", "--fence", "1", "--lease", "2m").returncode == 0
    )
    res = ledger(store, "complete", bad, "--owner", "w", "--fence", "1")
    assert res.returncode == 0, res.stderr
    assert text(res) == "completed key-\ufffd\n"
    state = json.loads(ledger(store, "--json", "state", bad).stdout)
    assert (state["Key"], state["Status"], state["Fence"]) == ("key-\ufffd", "completed", 1)
    log = ledger(store, "log", bad)
    assert [ln.split()[2] for ln in text(log).splitlines()] == [
        "ledger.claimed",
        "ledger.renewed",
        "ledger.completed",
    ]
    after = raw_rows(store)
    assert set(after) == set(before)  # no row made under a replacement key
    assert after[bad][1] == b"completed" and after[bad][0] == bad
    assert after[b"b"] == before[b"b"]
    # The shown form names no record: exit 3, nothing written.
    assert ledger(store, "state", "key-\ufffd").returncode == 3
    # Creating such a key from the command line is refused (docs/design.md §5.2).
    assert ledger(store, "admit", b"new-\xff").returncode == 2


def test_a_completed_key_with_invalid_bytes_is_pruned_byte_exactly(store: Path) -> None:
    """`prune` marks and keeps it under its exact bytes, as it keeps the record."""
    conn = go_db(store)
    go_row(conn, key=b"old-\xff", status="completed", created_at="2024-01-01T00:00:00Z")
    conn.close()
    res = ledger(store, "prune", "--older-than", "1h")
    assert (res.returncode, text(res)) == (0, "pruned 1 record\n"), res.stderr
    res = ledger(store, "state", b"old-\xff")
    assert res.returncode == 0 and "pruned:" in text(res), res.stderr
    with contextlib.closing(sqlite3.connect(store)) as conn:
        marked = conn.execute("SELECT CAST(key AS BLOB) FROM ledger_pruned").fetchall()
    assert marked == [(b"old-\xff",)]


def test_a_key_with_invalid_bytes_keeps_its_attempts_byte_exactly(store: Path) -> None:
    """`run` by the key's exact bytes records its attempt under those bytes
    (no warning, no row under a replacement key), and `output`, `state` and
    `doctor` read it back (docs/design.md §7.1, §5.2)."""
    _add_bad(store, "key")
    bad = b"key-\xff"
    res = ledger(store, "run", bad, "--owner", "w", "--lease", "1m", "--", "echo", "hi")
    assert (res.returncode, res.stdout, res.stderr) == (0, b"hi\n", b"")
    conn = sqlite3.connect(store)
    conn.text_factory = bytes
    try:
        rows = conn.execute("SELECT key, n, exit, output FROM ledger_attempts").fetchall()
    finally:
        conn.close()
    assert rows == [(bad, 1, 0, b"hi\n")]
    res = ledger(store, "output", bad)
    assert (res.returncode, res.stdout, res.stderr) == (0, b"hi\n", b"")
    got = json.loads(ledger(store, "--json", "output", bad).stdout)
    assert (got["key"], got["attempt"]["n"], got["output"]) == ("key-\ufffd", 1, "hi\n")
    state = json.loads(ledger(store, "--json", "state", bad).stdout)
    assert [(a["n"], a["exit"]) for a in state["attempts"]] == [(1, 0)]
    # `state` names the command that prints it all by the key's bytes, as bash reads them.
    hint = text(ledger(store, "state", bad)).splitlines()[-1]
    assert hint == f"all of it: ledger --store sqlite:{store} output $'key-\\xff'"
    # The shown form names neither the record nor its attempts.
    assert ledger(store, "output", "key-\ufffd").returncode == 3
    doctor = ledger(store, "doctor")  # 9: the key's own line; its attempts read fine
    assert doctor.returncode == 9
    assert b"attempt" not in doctor.stdout + doctor.stderr, doctor.stdout


def test_attempts_of_a_key_with_invalid_bytes_and_no_record_are_removed(store: Path) -> None:
    """`doctor` reads such a key back from ledger_attempts by its bytes, and
    `--fix` removes that key's attempts only."""
    conn = sqlite3.connect(store)
    try:
        conn.execute(SQLITE_DDL)
        for key in (b"gone-\xff", "a"):
            conn.execute(
                "INSERT INTO ledger_attempts (key, n, fence, try_n, owner, host, pid, started,"
                " timed_out, output_bytes, kept_bytes) VALUES"
                " (CAST(? AS TEXT), 1, 1, 1, 'w', 'h', 0, '2024-01-01T00:00:00Z', 0, 0, 0)",
                (key,),
            )
        conn.commit()
    finally:
        conn.close()
    doctor = ledger(store, "doctor")
    assert doctor.returncode == 0, doctor.stderr
    assert b"which has no record (--fix removes them)" in doctor.stdout
    assert ledger(store, "doctor", "--fix").returncode == 0
    conn = sqlite3.connect(store)
    conn.text_factory = bytes
    try:
        assert conn.execute("SELECT key FROM ledger_attempts").fetchall() == [(b"a",)]
    finally:
        conn.close()


def test_attempts_of_a_pruned_key_with_invalid_bytes_are_named_as_shown(store: Path) -> None:
    """`doctor`'s note and `--fix`'s line name such a key as every line shows
    it (its bad byte as U+FFFD), never as Python's repr (`'old-\\udcff'`)."""
    conn = go_db(store)
    go_row(conn, key=b"old-\xff", status="completed", created_at="2024-01-01T00:00:00Z")
    conn.close()
    assert ledger(store, "prune", "--older-than", "1h").returncode == 0
    conn = sqlite3.connect(store)  # a prune that stopped before its attempts
    try:
        conn.execute(SQLITE_DDL)
        conn.execute(
            "INSERT INTO ledger_attempts (key, n, fence, try_n, owner, host, pid, started,"
            " timed_out, output_bytes, kept_bytes) VALUES"
            " (CAST(? AS TEXT), 1, 1, 1, 'w', 'h', 0, '2024-01-01T00:00:00Z', 0, 0, 0)",
            (b"old-\xff",),
        )
        conn.commit()
    finally:
        conn.close()
    doctor = ledger(store, "doctor")  # 9: the key's own line (not valid UTF-8)
    assert doctor.returncode == 9, doctor.stderr
    note = "note: attempts of 'old-\ufffd', whose record is pruned (--fix removes them)"
    assert note in text(doctor).splitlines(), doctor.stdout
    notes = json.loads(ledger(store, "--json", "doctor").stdout)["notes"]
    assert note.removeprefix("note: ") in notes
    fixed = ledger(store, "doctor", "--fix")
    line = "fixed: removed the attempts of 'old-\ufffd', whose record is pruned"
    assert line in text(fixed).splitlines(), fixed.stdout


def test_needs_with_invalid_bytes_name_their_key_and_are_written_back_unchanged(
    store: Path,
) -> None:
    _add_bad(store, "needs")
    conn = go_db(store)
    go_row(conn, key=b"dep-\xff", status="completed", created_at="2023-01-01T00:00:00Z")
    conn.close()
    before = raw_rows(store)
    # The need is the completed "dep-\xff": `bad` is ready, and the oldest.
    res = ledger(store, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert text(res).split() == ["bad", "1"], res.stderr
    after = raw_rows(store)
    assert after[b"bad"][6] == b'["dep-\xff"]'  # needs column, byte for byte
    assert after[b"bad"][1] == b"claimed"
    assert {k for k in before if before[k] != after[k]} == {b"bad"}


def test_postgresql_cannot_hold_invalid_utf8(tmp_path: Path) -> None:
    """PostgreSQL refuses invalid UTF-8 in text itself, so no such row exists there:
    such a key names no record (exit 3), and nothing is written."""
    from tests.stores import KINDS

    with KINDS["postgresql"].place(tmp_path) as url:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn, pytest.raises(psycopg.DataError):
            conn.execute("SELECT convert_from('\\x6b6579ff'::bytea, 'UTF8')")
        env = subprocess_env()
        for args in (
            ["claim", b"key-\xff", "--owner", "w", "--lease", "1m"],
            ["state", b"key-\xff"],
            ["run", b"key-\xff", "--owner", "w", "--lease", "1m", "--", "true"],
            ["output", b"key-\xff"],
        ):
            res = subprocess.run(
                [*ledger_cmd(), "--store", url, *args], capture_output=True, env=env, check=False
            )
            assert res.returncode == 3, res.stderr
        res = subprocess.run(
            [*ledger_cmd(), "--store", url, "--json", "list"],
            capture_output=True,
            env=env,
            check=False,
        )
        assert (res.returncode, json.loads(res.stdout)) == (0, [])
        with psycopg.connect(url, autocommit=True) as conn:  # `run` started no attempt
            assert conn.execute("SELECT to_regclass('ledger_attempts')").fetchone() == (None,)


def test_a_key_with_invalid_bytes_is_cancelled_and_retried_byte_exactly(store: Path) -> None:
    """`cancel`, `retry`, `check` and `graph` name such a key by its exact
    bytes, as `claim` does (docs/design.md §5.2: only the commands that create
    a key refuse one that is not UTF-8); the row is written under those bytes."""
    _add_bad(store, "key")
    bad = b"key-\xff"
    res = ledger(store, "cancel", bad)
    assert (res.returncode, text(res)) == (0, "cancelled key-\ufffd\n"), res.stderr
    assert raw_rows(store)[bad][1] == b"failed"
    res = ledger(store, "retry", bad)
    assert (res.returncode, text(res)) == (0, "retried key-\ufffd\n"), res.stderr
    assert raw_rows(store)[bad][1] == b"pending"
    assert ledger(store, "check", bad, "--owner", "w", "--fence", "0").returncode == 6
    res = ledger(store, "--json", "graph", bad)
    assert res.returncode == 0, res.stderr
    assert set(raw_rows(store)) == {b"a", b"b", bad}  # no row under a replacement key
