"""`stats` on a JSON store that lost a record file the tally notes as
unfinished (a task with needs): exit 9 with one line naming the file, in a
fresh `ledger` process, rather than counts that include the lost task."""

from __future__ import annotations

import json
from pathlib import Path

from ledger_cli.stores.jsonfile.records import key_digest
from tests.cli_support import run_ledger


def _record(store: Path, key: str) -> Path:
    digest = key_digest(key)
    assert digest is not None
    return store / "records" / digest[:2] / f"{digest}.json"


def test_stats_names_a_lost_record_the_tally_counts(tmp_path: Path) -> None:
    store = tmp_path / "s"
    for args in (("admit", "a"), ("admit", "b", "--needs", "a")):
        assert run_ledger(store, *args).returncode == 0
    healthy = run_ledger(store, "--json", "stats")
    assert json.loads(healthy.stdout)["counts"]["pending"] == 2
    lost = _record(store, "b")
    lost.unlink()
    res = run_ledger(store, "stats")
    assert res.returncode == 9, res.stdout
    assert res.stderr.splitlines() == [
        f"ledger: store: {lost}: a record file is lost while the tally counts it "
        "(ledger doctor names its key)"
    ]
    assert res.stdout == ""
    doctor = run_ledger(store, "doctor")
    assert doctor.returncode == 9 and "record b is lost" in doctor.stdout, doctor.stdout
