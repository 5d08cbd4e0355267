"""A committed journal never wedges behind a damaged derived index:
the write that meets the damage exits 9 and leaves its journal (it is
committed); the replay by the next process marks the index "not built" and
applies the journal again, so the write lands and the index is rebuilt from
the records (stores/jsonfile/journal.py). Each command a fresh process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger
from tests.faults_support import unapplied

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> tuple[int, str, str]:
    res = run_ledger(store, "--now", NOW, "--actor", "t", *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res.returncode, res.stdout, res.stderr


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert _ledger(store, "admit", key)[0] == 0
    assert _ledger(store, "admit", "c", "--needs", "a")[0] == 0
    return store


def _tally_shard(store: Path, key: str) -> str:
    digest = key_digest(key)
    assert digest is not None
    return f"tally/{digest[:2]}"


@pytest.mark.parametrize(
    ("damaged", "write"),
    [
        ("ready/c0", ("admit", "n")),
        ("ready/manifest", ("admit", "n")),
        ("deps/manifest", ("admit", "n", "--needs", "a")),
        ("tally", ("claim", "c", "--owner", "w", "--lease", "1h")),
    ],
)
def test_the_next_process_replays_the_journal_and_rebuilds_the_index(
    tmp_path: Path, damaged: str, write: tuple[str, ...]
) -> None:
    store = _store(tmp_path)
    if damaged == "tally":  # c (pending with needs) is noted in its shard
        damaged = _tally_shard(store, "c")
    (store / damaged).write_bytes(b"\x00garbage\xff\n")
    code, _, err = _ledger(store, *write)
    # Exit 9 naming the file: met before the commit point, nothing is written;
    # after it, the journal stays (the write is committed) and lands below.
    assert code in (0, 9), err
    if code == 9:
        assert damaged in err and len(err.splitlines()) == 1
    landed = code == 0 or unapplied(store)
    fixed, out, err = _ledger(store, "doctor", "--fix")
    assert fixed == 0, out + err
    assert not unapplied(store)
    assert _ledger(store, "doctor")[0] == 0
    listing = {r["Key"]: r for r in json.loads(_ledger(store, "list", "--json")[1])}
    if write[0] == "admit":
        assert ("n" in listing) == landed
    else:
        assert (listing["c"]["Status"] == "claimed") == landed
    stats = json.loads(_ledger(store, "stats", "--json")[1])
    scan = {s: sum(r["Status"] == s for r in listing.values()) for s in stats["counts"]}
    assert stats["counts"] == scan
    code, out, _ = _ledger(store, "claim", "--next", "--owner", "w2", "--lease", "1h")
    assert code == 0 and out.split()[0] in ("a", "b")


def test_a_journal_behind_a_damaged_index_is_replayed_by_any_next_command(
    tmp_path: Path,
) -> None:
    """Not only doctor --fix: a read command's open finishes the journal too."""
    store = _store(tmp_path)
    (store / "ready" / "c0").write_bytes(b"")  # emptied: damage, not "no entries"
    code, _, _ = _ledger(store, "admit", "n")
    assert code in (0, 9)
    code, out, err = _ledger(store, "state", "n")
    assert code == 0, err
    assert not unapplied(store)
    code, out, _ = _ledger(store, "claim", "--next", "--owner", "w", "--lease", "1h")
    assert code == 0 and out.split()[0] == "a"
