"""A lost record whose key is written again, as the user meets it: the
record file of a claimed task deleted, then `admit` of its key. The live/
marker the JSON store keeps for every pending or claimed record says the
key is not new: the admit exits 9 naming the record file and writes nothing
(another claim would hand out the same fence to a second owner). `doctor
--fix` keeps the tally that makes scans exit 9; `--fix --drop-damaged`
accepts the loss; `restore` fills the key. Every command is a fresh `ledger`
process (tests/cli_support.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_ledger(store, "--now", NOW, "--actor", "t", *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def _record(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "records" / digest[:2] / f"{digest}.json"


def _files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.name not in ("ledger.lock", "wal.applied")
    }


def _lost_claim(tmp_path: Path) -> Path:
    """`job` claimed by w1 (fence 1), then its record file deleted; `other` pending."""
    store = tmp_path / "store"
    assert _ledger(store, "admit", "job").returncode == 0
    claim = _ledger(store, "claim", "job", "--owner", "w1", "--lease", "1h")
    assert claim.returncode == 0 and claim.stdout.strip() == "1", claim.stdout
    assert _ledger(store, "admit", "other").returncode == 0
    _record(store, "job").unlink()
    return store


def test_an_admit_of_a_lost_claimed_record_exits_9_and_writes_nothing(tmp_path: Path) -> None:
    store = _lost_claim(tmp_path)
    before = _files(store)
    res = _ledger(store, "admit", "job")
    assert res.returncode == 9, (res.stdout, res.stderr)
    assert res.stderr.splitlines() == [res.stderr.strip()]
    assert f"{_record(store, 'job')}: the record is lost" in res.stderr
    assert not _record(store, "job").exists()
    assert _files(store) == before  # no record file, the history unchanged
    # No second owner gets fence 1.
    assert _ledger(store, "claim", "job", "--owner", "w2", "--lease", "1h").returncode != 0
    assert _files(store) == before


def test_fix_keeps_the_loss_visible_until_drop_damaged(tmp_path: Path) -> None:
    store = _lost_claim(tmp_path)
    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 9 and "record job is lost" in fixed.stdout, fixed.stdout
    assert "kept while a record is lost" in fixed.stdout
    assert "rebuilt the tally" not in fixed.stdout
    for args in (("list", "--json"), ("snapshot",), ("stats",), ("admit", "job")):
        res = _ledger(store, *args)
        assert res.returncode == 9, (args, res.returncode, res.stderr)
    again = _ledger(store, "doctor")
    assert again.returncode == 9 and "record job is lost" in again.stdout
    dropped = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert dropped.returncode == 0, dropped.stdout
    assert "fixed: dropped job" in dropped.stdout
    assert _ledger(store, "doctor").returncode == 0
    listed = json.loads(_ledger(store, "list", "--json").stdout)
    assert [r["Key"] for r in listed] == ["other"]
    # The loss accepted, admitting the key again is an ordinary admit.
    assert _ledger(store, "admit", "job").returncode == 0
    assert _ledger(store, "doctor").returncode == 0


def test_restore_fills_the_key_of_a_lost_record(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _ledger(store, "admit", "job").returncode == 0
    assert _ledger(store, "claim", "job", "--owner", "w1", "--lease", "1h").returncode == 0
    snapshot = _ledger(store, "snapshot")
    assert snapshot.returncode == 0
    saved = tmp_path / "snap.json"
    saved.write_text(snapshot.stdout)
    _record(store, "job").unlink()
    assert _ledger(store, "admit", "job").returncode == 9
    restored = _ledger(store, "restore", str(saved))
    assert restored.returncode == 0, restored.stderr
    state = json.loads(_ledger(store, "--json", "state", "job").stdout)
    assert (state["Status"], state["Owner"], state["Fence"]) == ("claimed", "w1", 1), state


def test_drop_damaged_frees_a_dropped_key_whose_marker_came_back(tmp_path: Path) -> None:
    """Every --drop-damaged sweeps the markers of records without a file, so a
    marker that outlived its drop (a crash before its removal was durable)
    does not keep the key refused for good."""
    store = _lost_claim(tmp_path)
    assert _ledger(store, "doctor", "--fix", "--drop-damaged").returncode == 0
    digest = key_digest("job")
    assert digest is not None
    marker = store / "live" / digest
    marker.touch()
    marker.chmod(0o600)
    assert _ledger(store, "admit", "job").returncode == 9
    healed = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert healed.returncode == 0, healed.stdout
    assert not marker.exists()
    assert _ledger(store, "admit", "job").returncode == 0
