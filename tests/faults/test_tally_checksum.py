"""A tally count edited into another number, as the user meets it: the counts
file carries a checksum, so `stats` reports the damage (exit 9, one line
naming the file) rather than a wrong figure, `doctor` names it and
`doctor --fix` rebuilds it. Each command is a fresh `ledger` process."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import tally
from tests.cli_support import run_ledger

if TYPE_CHECKING:
    from pathlib import Path


def test_an_edited_count_is_damage_not_a_wrong_figure(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    counts = store / "tally" / "counts"
    text = counts.read_text()
    assert '"pending":2' in text
    counts.write_text(text.replace('"pending":2', '"pending":3'))
    stats = run_ledger(store, "stats")
    assert stats.returncode == 9, stats.stdout
    assert stats.stderr.splitlines() == [
        f"ledger: store: {counts}: corrupt tally counts (ledger doctor --fix rebuilds them)"
    ]
    assert run_ledger(store, "doctor").returncode == 9
    assert run_ledger(store, "doctor", "--fix").returncode == 0
    fixed = run_ledger(store, "--json", "stats")
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["counts"]["pending"] == 2


def test_a_counts_file_without_a_sum_is_still_read() -> None:
    """An earlier release wrote no "sum": its counts are taken as they are."""
    doc = {"format": tally.FORMAT, "version": tally.VERSION, "counts": tally.zero()}
    assert tally.parse_counts(json.dumps(doc).encode(), "counts") == tally.zero()
    assert tally.parse_counts(tally.encode_counts(tally.zero()), "counts") == tally.zero()
