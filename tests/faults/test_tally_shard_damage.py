"""A tally shard file (`tally/ab`, the records `stats` judges one by one)
that lists a record twice, as the user meets it: `stats` refuses it (exit 9,
the remedy `ledger doctor --fix`), so `doctor` names it as a problem and
`doctor --fix` rebuilds the tally, after which `stats` answers. Each command
is a fresh `ledger` process."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.cli_support import run_ledger

if TYPE_CHECKING:
    from pathlib import Path


def test_a_repeated_shard_line_is_named_and_rebuilt(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a", "--needs", "x").returncode == 0
    shards = [p for p in (store / "tally").iterdir() if p.name != "counts"]
    assert len(shards) == 1
    shard = shards[0]
    shard.write_bytes(shard.read_bytes() * 2)

    stats = run_ledger(store, "stats")
    assert stats.returncode == 9, stats.stdout
    assert "ledger doctor --fix rebuilds it" in stats.stderr, stats.stderr

    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 9, doctor.stdout
    assert f"problem: tally: {shard}: 1 unfinished record(s) listed more than once" in (
        doctor.stdout
    ), doctor.stdout

    fixed = run_ledger(store, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout
    assert "fixed: rebuilt the tally from the records" in fixed.stdout, fixed.stdout
    assert len(shard.read_bytes().split()) == 1
    stats = run_ledger(store, "--json", "stats")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["counts"]["pending"] == 1
    again = run_ledger(store, "doctor")
    assert again.returncode == 0 and "tally" not in again.stdout, again.stdout
