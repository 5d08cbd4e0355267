"""`ledger restore` into a JSON store its commit would refuse (a damaged
tally, a torn or lost history): exit 9 naming the damage and nothing written,
so that once the remedy it names has run, the same restore lands whole. It
used to write the snapshot's pruned lines and side files first, and then
refused the rest forever (their keys were taken). Fresh `ledger` processes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests.cli_support import ledger_ok, run_ledger


def _files(store: Path) -> dict[str, str]:
    return {
        str(Path(d, n).relative_to(store)): hashlib.sha256(Path(d, n).read_bytes()).hexdigest()
        for d, _, names in os.walk(store)
        for n in names
    }


def _damage(store: Path, how: str) -> list[str]:
    """Damage the store; the doctor arguments that accept or repair it."""
    if how == "tally":
        (store / "tally" / "counts").write_bytes(b"x")
        return ["--fix"]
    if how == "torn history":
        with (store / "history.jsonl").open("ab") as f:
            f.write(b'{"torn')
        return ["--fix", "--drop-damaged"]
    (store / "history.jsonl").unlink()
    return ["--fix", "--drop-damaged"]


@pytest.mark.parametrize("how", ["tally", "torn history", "lost history"])
def test_restore_into_damage_writes_nothing_and_lands_after_the_remedy(
    tmp_path: Path, how: str
) -> None:
    store = tmp_path / "st"
    ledger_ok(store, "admit", "a")
    fence = ledger_ok(store, "claim", "a", "--owner", "w", "--lease", "1m").strip()
    ledger_ok(store, "complete", "a", "--owner", "w", "--fence", fence)
    ledger_ok(store, "prune", "--older-than", "0s", "--now", "2030-01-01T00:00:00Z")
    ledger_ok(store, "admit", "x", "--queue", "q", "--delay", "1h")
    snap = ledger_ok(store, "snapshot").replace('"Key":"a"', '"Key":"b"')
    snap = snap.replace('"Key":"x"', '"Key":"y"').encode()
    remedy = _damage(store, how)
    before = _files(store)
    done = run_ledger(store, "restore", "-", input=snap)
    assert (done.returncode, done.stdout) == (9, ""), done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("ledger: store: ")
    assert _files(store) == before  # nothing written: no pruned line, no side file
    fixed = run_ledger(store, "doctor", *remedy)
    assert fixed.returncode == 0, fixed.stdout
    again = run_ledger(store, "restore", "-", input=snap)
    assert again.returncode == 0, again.stderr
    assert "b" in ledger_ok(store, "list", "--pruned") and "y" in ledger_ok(store, "list")
