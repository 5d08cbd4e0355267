"""A JSON store that lost a record file or a tally file, as a fresh `ledger`
process meets it: `stats` (a task with needs, which the tally notes by
name, or the tally's file of them) and `snapshot` and `list` (any task: the
tally counts it) exit 9 with one line naming the file or the tally, rather
than an answer without the lost task; `doctor` names the loss."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_cli.stores.jsonfile import tally
from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger


def _record(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "records" / digest[:2] / f"{digest}.json"


def _refused(store: Path, *args: str) -> list[str]:
    """The stderr lines of a command that must exit 9 and print nothing."""
    res = run_ledger(store, *args)
    assert (res.returncode, res.stdout) == (9, ""), (args, res.returncode, res.stdout)
    return res.stderr.splitlines()


def test_stats_names_a_lost_record_the_tally_counts(tmp_path: Path) -> None:
    store = tmp_path / "s"
    for args in (("admit", "a"), ("admit", "b", "--needs", "a")):
        assert run_ledger(store, *args).returncode == 0
    healthy = run_ledger(store, "--json", "stats")
    assert json.loads(healthy.stdout)["counts"]["pending"] == 2
    lost = _record(store, "b")
    lost.unlink()
    assert _refused(store, "stats") == [
        f"ledger: store: {lost}: a record file is lost while the tally counts it "
        "(ledger doctor names its key)"
    ]
    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 9 and "record b is lost" in doctor.stdout, doctor.stdout


def test_snapshot_and_list_refuse_a_store_that_lost_a_record(tmp_path: Path) -> None:
    store = tmp_path / "s"
    for key in ("a", "b", "c"):
        assert run_ledger(store, "admit", key).returncode == 0
    _record(store, "b").unlink()
    want = [
        f"ledger: store: {store / 'tally' / 'counts'}: the tally counts other records than "
        "the record files hold: pending 3 (read 2); a record file is lost or the tally is "
        "damaged (ledger doctor names which)"
    ]
    for args in (("snapshot",), ("list",), ("list", "--status", "completed")):
        assert _refused(store, *args) == want, args
    # Streamed: the rows read are out before the scan's end finds the loss.
    streamed = run_ledger(store, "list", "--jsonl")
    assert (streamed.returncode, streamed.stderr.splitlines()) == (9, want)
    assert len(streamed.stdout.splitlines()) == 2
    as_json = run_ledger(store, "--json", "list")
    assert as_json.returncode == 9
    assert json.loads(as_json.stdout)["error"]["message"] == want[0]
    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 9 and "record b is lost" in doctor.stdout, doctor.stdout


def test_stats_refuses_a_lost_file_of_noted_records(tmp_path: Path) -> None:
    """b waits on a, so the tally notes it in a shard file; with that file
    gone, stats would count b neither ready nor waiting."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    assert run_ledger(store, "admit", "b", "--needs", "a").returncode == 0
    (shard,) = [p for p in (store / "tally").iterdir() if p.name != tally.COUNTS]
    shard.unlink()
    assert _refused(store, "stats") == [
        f"ledger: store: {store / 'tally'}: the tally notes 0 unfinished records where "
        "its counts say 1 (ledger doctor --fix rebuilds it)"
    ]
    assert run_ledger(store, "doctor").returncode == 9
    assert run_ledger(store, "doctor", "--fix").returncode == 0
    fixed = run_ledger(store, "--json", "stats")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["counts"]["pending"] == 2
