"""`ledger doctor` on a JSON store whose record file of a need is damaged
(cut to 50 bytes), as a fresh process: the file is named once, as one
problem (not again by each index check that meets it), and the dependent's
need is not called "never admitted": it was, and its file is damaged."""

from __future__ import annotations

from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import ledger_ok, run_ledger


def test_a_damaged_need_is_named_once_and_not_called_never_admitted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ledger_ok(store, "admit", "a")
    ledger_ok(store, "admit", "c", "--needs", "a")
    digest = key_digest("a")
    assert digest is not None
    record = store / "records" / digest[:2] / f"{digest}.json"
    record.write_bytes(record.read_bytes()[:50])

    res = run_ledger(store, "doctor")
    assert res.returncode == 9, res.stdout
    problems = [ln for ln in res.stdout.splitlines() if ln.startswith("problem: ")]
    assert len(problems) == 1 and str(record) in problems[0], res.stdout
    assert "never admitted" not in res.stdout, res.stdout
    assert "c: needs a, which has a damaged record file" in res.stdout, res.stdout
