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
    marker = _marker_back(store, "job")
    assert _ledger(store, "admit", "job").returncode == 9
    healed = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert healed.returncode == 0, healed.stdout
    assert not marker.exists()
    assert _ledger(store, "admit", "job").returncode == 0


def test_a_plain_read_never_frees_a_lost_records_key(tmp_path: Path) -> None:
    """`list --status claimed` reads live/ (the claimable-work scan): it exits 9
    naming the lost record rather than answer without it, and drops nothing,
    so the key stays refused and no second owner gets fence 1: the first
    holder's completion then fails against the fence a later claim granted."""
    store = _lost_claim(tmp_path)
    before = _files(store)
    for status in ("claimed", "pending"):
        res = _ledger(store, "list", "--status", status)
        assert res.returncode == 9, (status, res.stdout, res.stderr)
        assert res.stderr.splitlines() == [res.stderr.strip()]
        assert f"{_record(store, 'job')}: the record is lost" in res.stderr
        assert "ledger doctor" in res.stderr
        assert res.stdout == ""
    assert _files(store) == before  # the live/ marker kept
    assert _ledger(store, "admit", "job").returncode == 9
    assert _ledger(store, "claim", "job", "--owner", "w2", "--lease", "1h").returncode != 0
    dropped = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert dropped.returncode == 0, dropped.stdout
    assert "raised the fence floor from 0 to 1" in dropped.stdout
    assert _ledger(store, "admit", "job").returncode == 0
    claim = _ledger(store, "claim", "job", "--owner", "w2", "--lease", "1h")
    assert claim.returncode == 0 and claim.stdout.strip() == "2", claim.stdout
    late = _ledger(store, "complete", "job", "--owner", "w1", "--fence", "1")
    assert late.returncode == 5, (late.stdout, late.stderr)
    listed = _ledger(store, "list", "--status", "claimed", "--json")
    assert [r["Key"] for r in json.loads(listed.stdout)] == ["job"]


def _marker_back(store: Path, key: str) -> Path:
    """A live/ marker of `key` put back by hand, as a crash can leave one."""
    digest = key_digest(key)
    assert digest is not None
    marker = store / "live" / digest
    marker.touch()
    marker.chmod(0o600)
    return marker


def _pruned_leftover(tmp_path: Path) -> tuple[Path, Path]:
    """`job` completed and pruned, then a live/ marker of it put back: what a
    store made before prune dropped live entries can hold. `other` claimed
    (fence 1): a floor raised for the leftover would show."""
    store = tmp_path / "store"
    assert _ledger(store, "admit", "other").returncode == 0
    assert _ledger(store, "claim", "other", "--owner", "w1", "--lease", "1h").returncode == 0
    assert _ledger(store, "admit", "job").returncode == 0
    assert _ledger(store, "claim", "job", "--owner", "w1", "--lease", "1h").returncode == 0
    assert _ledger(store, "complete", "job", "--owner", "w1", "--fence", "1").returncode == 0
    assert _ledger(store, "prune", "--older-than", "0s").returncode == 0
    return store, _marker_back(store, "job")


def test_a_pruned_records_leftover_entry_is_no_loss(tmp_path: Path) -> None:
    """A marker whose record file is missing because the record was pruned is
    a finished record's stale entry: a read drops it, and doctor neither
    reports nor drops a loss for it, nor raises the fence floor."""
    store, marker = _pruned_leftover(tmp_path)
    listed = _ledger(store, "list", "--status", "claimed", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["Key"] for r in json.loads(listed.stdout)] == ["other"]
    assert not marker.exists()
    marker.touch()
    marker.chmod(0o600)
    assert _ledger(store, "doctor").returncode == 0
    healed = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert healed.returncode == 0, healed.stdout
    assert "fence floor" not in healed.stdout and "dropped" not in healed.stdout, healed.stdout
    assert not marker.exists()
    assert _ledger(store, "admit", "job").stdout.strip() == "duplicate"


def test_prune_drops_the_live_entries_of_what_it_prunes(tmp_path: Path) -> None:
    """A batch admit lists its records in live/'s shard files, and their
    completions leave those entries for a scan: prune drops them with the
    records, so no entry outlives its record file."""
    store = tmp_path / "store"
    keys = [f"t{i}" for i in range(17)]  # more than apply.SYNC_EACH_MAX: shard files
    batch = "".join(json.dumps({"key": key}) + "\n" for key in keys)
    admitted = run_ledger(store, "--now", NOW, "admit", "--batch", "-", input=batch.encode())
    assert admitted.returncode == 0, admitted.stderr
    assert list((store / "live").glob("*.idx"))
    for key in keys:
        assert _ledger(store, "claim", key, "--owner", "w", "--lease", "1h").returncode == 0
        assert _ledger(store, "complete", key, "--owner", "w", "--fence", "1").returncode == 0
    assert _ledger(store, "prune", "--older-than", "0s").stdout.strip() == "pruned 17 records"
    assert [p.name for p in (store / "live").iterdir()] == []
    healed = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert healed.returncode == 0 and "fence floor" not in healed.stdout, healed.stdout
