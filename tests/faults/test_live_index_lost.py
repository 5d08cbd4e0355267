"""A lost live/ entry, as the user meets it: the marker of a pending or
claimed record deleted, or a shard's index file (`live/ab.idx`, what a large
batch lists) cut, emptied, deleted or overwritten. live/ is what `list
--status pending|claimed`, `wait --all` and `run --drain` read; one that
misses a record must not answer without it. The scan compares what it found
with the tally's counts: fewer is exit 9 naming live/, nothing written;
`doctor` names the record live/ misses (or the shard file that does not
read), `doctor --fix` puts its marker back, and then the record is listed
again. Every command is a fresh `ledger` process (tests/cli_support.py)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(
    store: Path, *args: str, input: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    res = run_ledger(store, "--now", NOW, "--actor", "t", *args, input=input)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def _marker(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "live" / digest


def _files(store: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(store)): p.read_bytes()
        for p in sorted(store.rglob("*"))
        if p.is_file() and p.name not in ("ledger.lock", "wal.applied")
    }


def _refused(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`args` exits 9 with one line naming live/, and writes nothing."""
    before = _files(store)
    res = _ledger(store, *args)
    assert res.returncode == 9, (args, res.returncode, res.stdout, res.stderr)
    assert res.stderr.splitlines() == [res.stderr.strip()], res.stderr
    assert f"ledger: store: {store}/live" in res.stderr, res.stderr
    assert _files(store) == before, f"{args}: a refused read wrote"
    return res


def _keys(store: Path, status: str) -> list[str]:
    res = _ledger(store, "list", "--status", status, "--json")
    assert res.returncode == 0, res.stderr
    return [rec["Key"] for rec in json.loads(res.stdout)]


def _repaired(store: Path, named: str) -> None:
    """`doctor` names the damage (exit 9), `--fix` repairs it, `doctor` is clean."""
    doctor = _ledger(store, "doctor")
    assert doctor.returncode == 9, doctor.stdout
    assert named in doctor.stdout, doctor.stdout
    fixed = _ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert "fixed: rebuilt the live index from the records" in fixed.stdout, fixed.stdout
    again = _ledger(store, "doctor")
    assert again.returncode == 0 and again.stdout.endswith("no problems found\n"), again.stdout


@pytest.mark.parametrize("status", ["claimed", "pending"])
def test_a_lost_marker_is_damage_naming_live(tmp_path: Path, status: str) -> None:
    store = tmp_path / "store"
    for key in ("job", "other", "done"):
        assert _ledger(store, "admit", key).returncode == 0
    for key in ("job", "done"):
        assert _ledger(store, "claim", key, "--owner", "w", "--lease", "1h").returncode == 0
    assert _ledger(store, "complete", "done", "--owner", "w", "--fence", "1").returncode == 0
    lost = "job" if status == "claimed" else "other"
    _marker(store, lost).unlink()

    res = _refused(store, "list", "--status", status)
    assert f"{status} 1 (listed 0)" in res.stderr, res.stderr
    _refused(store, "list", "--status", "pending", "--status", "claimed")
    err = _refused(store, "--json", "list", "--status", status)
    assert json.loads(err.stdout)["error"]["exit"] == 9, err.stdout

    _repaired(store, f"live index: {status} record {lost!r} is missing from live/")
    assert _marker(store, lost).exists()
    assert _keys(store, status) == [lost]


def test_wait_all_json_agrees_with_its_line(tmp_path: Path) -> None:
    """`wait --all --json` timed out over a live/ that misses the claimed
    record: exit 9 naming live/, not `"unsettled": []` beside a line that
    counts one record."""
    store = tmp_path / "store"
    assert _ledger(store, "admit", "job").returncode == 0
    assert _ledger(store, "claim", "job", "--owner", "w", "--lease", "1h").returncode == 0
    _marker(store, "job").unlink()
    res = _refused(store, "--json", "wait", "--all", "--timeout", "100ms")
    assert json.loads(res.stdout)["error"]["exit"] == 9, res.stdout
    assert "still pending or claimed" not in res.stderr, res.stderr

    _repaired(store, "live index: claimed record 'job' is missing from live/")
    res = _ledger(store, "--json", "wait", "--all", "--timeout", "100ms")
    assert res.returncode == 124, res.stderr
    assert json.loads(res.stdout)["unsettled"] == ["job"], res.stdout
    assert res.stderr == "ledger: timed out; 1 record still pending or claimed\n"


BATCH = 40
"""Records one `admit --batch` makes live: over 16, so listed in live/ab.idx files."""


def _batch_store(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose BATCH pending records a batch listed in shard files, and
    the shard file that lists the most of them (at least two)."""
    store = tmp_path / "store"
    lines = "".join(json.dumps({"key": f"k{i}"}) + "\n" for i in range(BATCH))
    res = _ledger(store, "admit", "--batch", "-", input=lines.encode())
    assert res.returncode == 0, res.stderr
    shards = sorted((store / "live").glob("*.idx"), key=lambda p: -len(p.read_bytes()))
    assert shards and len(shards[0].read_bytes().split()) >= 2, "no shard lists two records"
    return store, shards[0]


@pytest.mark.parametrize("way", ["truncated", "empty", "deleted"])
def test_a_cut_shard_index_is_damage_naming_live(tmp_path: Path, way: str) -> None:
    store, shard = _batch_store(tmp_path)
    data = shard.read_bytes()
    if way == "truncated":
        shard.write_bytes(data[: len(data) // 2])  # mid-line: a torn append's shape
    elif way == "empty":
        shard.write_bytes(b"")
    else:
        shard.unlink()
    res = _refused(store, "list", "--status", "pending")
    assert f"pending {BATCH} (listed " in res.stderr, res.stderr
    _repaired(store, "live index: pending record ")
    assert sorted(_keys(store, "pending")) == sorted(f"k{i}" for i in range(BATCH))


def test_a_shard_index_of_random_bytes_is_named_and_rebuilt(tmp_path: Path) -> None:
    store, shard = _batch_store(tmp_path)
    shard.write_bytes(bytes(random.Random(7).randrange(256) for _ in range(130)))
    # A listing goes around a bad record file (§5.5), not around a bad live/.
    res = _refused(store, "list", "--status", "pending")
    assert f"{shard}: corrupt index entry" in res.stderr, res.stderr
    _repaired(store, f"{shard}: corrupt index entry")
    assert sorted(_keys(store, "pending")) == sorted(f"k{i}" for i in range(BATCH))


@pytest.mark.parametrize("lost", ["every shard file", "one shard file"])
def test_a_lost_entry_is_damage_while_the_tally_is_not_built(tmp_path: Path, lost: str) -> None:
    """With tally/counts missing (the tally not built: an older store, a
    prune or a `doctor --fix` cut short), there are no counts to check live/
    against: the scan checks it against the records, counted under the same
    lock hold, so a lost entry is still exit 9 naming live/, never a short
    answer with exit 0. ("one shard file": what a `doctor --fix` killed
    halfway through putting markers back leaves.)"""
    store, shard = _batch_store(tmp_path)
    assert _ledger(store, "claim", "k0", "--owner", "w", "--lease", "1h").returncode == 0
    (store / "tally" / "counts").unlink()
    for path in (store / "live").glob("*.idx") if lost == "every shard file" else [shard]:
        path.unlink()

    res = _refused(store, "list", "--status", "pending")
    assert "the record files hold more live records than the index lists" in res.stderr
    _refused(store, "list", "--status", "pending", "--status", "claimed")
    _refused(store, "--json", "wait", "--all", "--timeout", "100ms")

    _repaired(store, "live index: pending record ")
    assert sorted(_keys(store, "pending")) == sorted(f"k{i}" for i in range(1, BATCH))
    assert _keys(store, "claimed") == ["k0"]


def test_live_without_the_tally_answers_whole(tmp_path: Path) -> None:
    """With tally/counts missing and live/ whole, the live/ scan answers, every
    pending and claimed record, exit 0."""
    store, _ = _batch_store(tmp_path)
    assert _ledger(store, "claim", "k0", "--owner", "w", "--lease", "1h").returncode == 0
    (store / "tally" / "counts").unlink()
    assert sorted(_keys(store, "pending")) == sorted(f"k{i}" for i in range(1, BATCH))
    assert _keys(store, "claimed") == ["k0"]
    res = _ledger(store, "--json", "wait", "--all", "--timeout", "100ms")
    assert res.returncode == 124, res.stderr
    assert len(json.loads(res.stdout)["unsettled"]) == BATCH
