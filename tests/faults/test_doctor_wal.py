"""Damage `ledger doctor` must find in a JSON store's side files, named by the
file that is damaged: wal.log's frames already applied (walcheck.py), a
flipped byte in wal.applied, and pruned/count. Every command is a fresh
`ledger` process (tests/cli_support.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_ledger(store, "--now", NOW, "--actor", "t", *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr + res.stdout, res.stderr
    return res


def _keys(store: Path) -> dict[str, str]:
    res = _ledger(store, "list", "--json")
    assert res.returncode == 0, res.stderr
    return {r["Key"]: r["Status"] for r in json.loads(res.stdout)}


def _restart(store: Path) -> None:
    """wal.applied from another boot, as after a restart of the machine."""
    mark = store / "wal.applied"
    mark.write_bytes(b"X" + mark.read_bytes()[1:])


def _logged_store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert _ledger(store, "admit", key).returncode == 0
    assert (store / "wal.log").stat().st_size > 0, "the admits are in wal.log"
    return store


def _flip_applied_frame(store: Path) -> bytes:
    """A byte of the first frame (a's admit, applied already) changed."""
    log = store / "wal.log"
    data = bytearray(log.read_bytes())
    at = data.find(b'"a"')
    data[at + 1] = ord("z")
    log.write_bytes(bytes(data))
    return bytes(data)


def test_doctor_finds_a_damaged_frame_already_applied(tmp_path: Path) -> None:
    store = _logged_store(tmp_path)
    damaged = _flip_applied_frame(store)
    assert _keys(store) == {"a": "pending", "b": "pending"}  # applied: in the files

    res = _ledger(store, "doctor")
    assert res.returncode == 9, res.stdout
    assert f"problem: {store}/wal.log: damaged frame at byte 0" in res.stdout, res.stdout
    assert "ledger doctor --fix makes them durable" in res.stdout, res.stdout
    assert (store / "wal.log").read_bytes() == damaged, "doctor wrote"
    as_json = json.loads(_ledger(store, "--json", "doctor").stdout)
    assert as_json["records"] == 2 and len(as_json["problems"]) == 1, as_json

    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert "its writes are durable; the log moved to" in fixed.stdout, fixed.stdout
    assert (store / "damaged" / "wal.log.1").read_bytes() == damaged
    clean = _ledger(store, "doctor")
    assert clean.returncode == 0 and "problem:" not in clean.stdout, clean.stdout
    _restart(store)  # nothing left to apply again: the writes are in the files
    assert _keys(store) == {"a": "pending", "b": "pending"}
    assert _ledger(store, "admit", "c").returncode == 0


def _flip_mark(store: Path, field: int, digit: int) -> None:
    """One digit of wal.applied's `field` (1: offset, 2: the last frame's
    start, 3: its CRC-32) changed."""
    mark = store / "wal.applied"
    words = mark.read_bytes().split(b" ")
    word = bytearray(words[field])
    word[-digit] = ord("7") if word[-digit] != ord("7") else ord("3")
    words[field] = bytes(word)
    mark.write_bytes(b" ".join(words))


def test_a_flipped_byte_in_wal_applied_is_not_called_a_damaged_log(tmp_path: Path) -> None:
    """wal.applied is derived: a byte of it flipped, the log (whole) is applied
    again, as after a restart, and every command answers as before."""
    for field, digit in ((1, 4), (2, 2), (3, 1), (3, 10)):
        store = _logged_store(tmp_path / f"f{field}d{digit}")
        assert _ledger(store, "claim", "a", "--owner", "w", "--lease", "1h").returncode == 0
        before = _keys(store)
        _flip_mark(store, field, digit)
        res = _ledger(store, "list", "--json")
        assert res.returncode == 0, (field, digit, res.stderr)
        assert _keys(store) == before
        doctor = _ledger(store, "doctor")
        assert doctor.returncode == 0 and "problem:" not in doctor.stdout, doctor.stdout
        assert _ledger(store, "complete", "a", "--owner", "w", "--fence", "1").returncode == 0
    # Whereas a log cut to its first frame lost the frame the mark names: the
    # log's damage, not the mark's.
    store = tmp_path / "cut"
    assert _ledger(store, "admit", "a").returncode == 0
    first = (store / "wal.log").stat().st_size
    assert _ledger(store, "admit", "b").returncode == 0
    with open(store / "wal.log", "r+b") as log:
        log.truncate(first)
    res = _ledger(store, "list")
    assert res.returncode == 9 and f"{store}/wal.log: damaged" in res.stderr, res.stderr
