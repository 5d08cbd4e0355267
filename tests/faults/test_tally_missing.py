"""The JSON store's tally counts missing (docs/stores.md "Counts kept, not
counted"): a prune's block removes them until its end, so a reader finds them
missing during every prune, and a prune killed -9 leaves them missing. Readers
count the records meanwhile, and the counts are not left missing: the next
prune builds them, and `doctor` notes them and `--fix` builds them. Each
command a fresh `ledger` process."""

from __future__ import annotations

from pathlib import Path

from tests.cli_support import run_ledger
from tests.faults.test_prune_attempts import build

COUNTS = Path("tally") / "counts"


def test_wait_all_counts_the_records_while_the_tally_counts_are_missing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    assert run_ledger(root, "admit", "a").returncode == 0
    (root / COUNTS).unlink()
    res = run_ledger(root, "wait", "--all", "--timeout", "100ms")
    assert res.returncode == 124, res.stderr
    assert res.stderr == "ledger: timed out; 1 record still pending or claimed\n"


def test_a_prune_after_one_killed_builds_the_missing_counts(tmp_path: Path) -> None:
    root = tmp_path / "store"
    build(root, 5)
    (root / COUNTS).unlink()  # as a prune killed -9 inside a block leaves them
    res = run_ledger(root, "prune", "--older-than", "1s")
    assert res.returncode == 0, res.stderr
    assert (root / COUNTS).exists()
    res = run_ledger(root, "doctor")
    assert res.returncode == 0 and res.stdout.endswith("no problems found\n"), res.stdout


def test_doctor_notes_missing_counts_and_fix_builds_them(tmp_path: Path) -> None:
    root = tmp_path / "store"
    assert run_ledger(root, "admit", "a").returncode == 0
    (root / COUNTS).unlink()
    res = run_ledger(root, "doctor")
    assert res.returncode == 0, res.stderr
    assert "note: tally: the counts are not built (ledger doctor --fix builds them)" in res.stdout
    res = run_ledger(root, "doctor", "--fix")
    assert res.returncode == 0, res.stderr
    assert "fixed: built the tally's missing counts from the records" in res.stdout
    assert (root / COUNTS).exists()
    res = run_ledger(root, "doctor")
    assert res.returncode == 0 and "tally" not in res.stdout, res.stdout
