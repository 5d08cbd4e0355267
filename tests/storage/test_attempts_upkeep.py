"""Attempts kept in step with their records (docs/design.md §7.1), on every durable store:
`prune` removes a pruned key's attempts; `doctor` notes attempts whose key has
no record, `--fix` removes them; the JSON store's attempt files are 0600 in
0700 directories and a stray temporary file is a note that `--fix` removes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ledger_cli.stores import open_store
from ledger_cli.stores.attemptlog import attempt_log
from tests.cli.test_output_wait import ledger, record_attempt


def test_prune_removes_a_pruned_keys_attempts(url: str) -> None:
    for key in ("old", "young"):
        assert ledger(url, "admit", key, "--now", "2026-01-01T00:00:00Z").returncode == 0
        f = ledger(url, "claim", key, "--owner", "w", "--lease", "1m").stdout.decode().strip()
        now = "2026-01-01T00:00:00Z" if key == "old" else "2026-01-05T00:00:00Z"
        assert (
            ledger(url, "complete", key, "--owner", "w", "--fence", f, "--now", now).returncode == 0
        )
        with open_store(url) as store:
            record_attempt(store, key, b"out", exit=0)
    res = ledger(url, "prune", "--older-than", "2d", "--now", "2026-01-06T00:00:00Z")
    assert res.returncode == 0, res.stderr
    with open_store(url) as store:
        log = attempt_log(store)
        assert log.list_attempts("old") == []
        assert [a.n for a in log.list_attempts("young")] == [1]
    assert ledger(url, "output", "old").returncode == 1


def test_doctor_notes_attempts_without_a_record_and_fix_removes_them(url: str) -> None:
    assert ledger(url, "admit", "real").returncode == 0
    with open_store(url) as store:
        record_attempt(store, "real", b"fine")
        record_attempt(store, "ghost", b"orphan")
    res = ledger(url, "--json", "doctor")
    assert res.returncode == 0, res.stdout
    doc = json.loads(res.stdout)
    assert doc["problems"] == []
    assert doc["notes"] == ["attempts of 'ghost', which has no record (--fix removes them)"]
    res = ledger(url, "--json", "doctor", "--fix")
    assert json.loads(res.stdout)["fixed"] == [
        "removed the attempts of 'ghost', which has no record"
    ]
    doc = json.loads(ledger(url, "--json", "doctor").stdout)
    assert doc["notes"] == [] and doc["problems"] == []
    with open_store(url) as store:
        assert attempt_log(store).attempt_keys() == ["real"]


def test_json_attempt_files_modes_and_strays(tmp_path: Path) -> None:
    root = tmp_path / "store"
    url = f"json:{root}"
    assert ledger(url, "admit", "job").returncode == 0
    with open_store(url) as store:
        record_attempt(store, "job", b"out")
    files = [p for p in (root / "attempts").rglob("*")]
    assert files
    for p in files:
        mode = p.stat().st_mode & 0o777
        assert mode == (0o700 if p.is_dir() else 0o600), p
    (att,) = [p for p in files if p.suffix == ".att"]
    stray = att.parent / ".1.att.deadbeef.tmp"
    stray.write_bytes(b"half")
    os.chmod(stray, 0o600)
    doc = json.loads(ledger(url, "--json", "doctor").stdout)
    assert doc["problems"] == []
    assert any(str(stray) in n for n in doc["notes"])
    ledger(url, "doctor", "--fix")
    assert not stray.exists()
    assert ledger(url, "output", "job").stdout == b"out"
