"""A JSON store's history.started (the mark of the history's first line,
stores/jsonfile/historymark.py) damaged, as the user meets it: every command
a fresh `ledger` process. A mark that no longer reads says nothing about
what the history starts with, so it is damage, not an older release's empty
mark: `doctor` names it (exit 9), a writer and `log` refuse it (exit 9,
nothing written) rather than mark whatever the history starts with now;
`doctor --fix` writes it again when what is left agrees with the history's
first line. Beside an emptied history it is never silent: `--fix` leaves
it, and `--fix --drop-damaged` accepts the history as it is, saying so."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.cli_support import ledger_ok, run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_ledger(store, "--now", NOW, *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def _store(tmp_path: Path) -> tuple[Path, Path]:
    store = tmp_path / "store"
    for key in ("a", "b"):
        ledger_ok(store, "--now", NOW, "admit", key)
    mark = store / "history.started"
    mark.write_bytes(mark.read_bytes()[:20])  # cut short, as `truncate -s 20`
    return store, mark


def test_a_cut_mark_is_named_refused_and_written_again(tmp_path: Path) -> None:
    store, mark = _store(tmp_path)
    history = (store / "history.jsonl").read_bytes()

    res = _ledger(store, "doctor")
    assert res.returncode == 9, res.stdout
    assert f"problem: {mark}: damaged mark of the history's first line" in res.stdout
    for args in (("admit", "c"), ("log",)):
        res = _ledger(store, *args)
        assert res.returncode == 9, (args, res.stdout)
        assert res.stderr.startswith(f"ledger: store: {mark}: damaged mark"), res.stderr
    assert (store / "history.jsonl").read_bytes() == history

    res = _ledger(store, "doctor", "--fix")
    assert res.returncode == 0, res.stdout
    assert f"fixed: {mark}: written again from the first line of history.jsonl" in res.stdout
    assert _ledger(store, "admit", "c").returncode == 0
    res = _ledger(store, "doctor")
    assert res.returncode == 0 and res.stdout.endswith("no problems found\n"), res.stdout


def test_an_emptied_history_beside_a_damaged_mark_is_not_silent(tmp_path: Path) -> None:
    store, mark = _store(tmp_path)
    (store / "history.jsonl").write_bytes(b"")

    res = _ledger(store, "doctor")
    assert res.returncode == 9, res.stdout
    assert "history.jsonl is empty: it may have been emptied" in res.stdout, res.stdout
    res = _ledger(store, "admit", "c")
    assert res.returncode == 9, res.stdout
    assert (store / "history.jsonl").read_bytes() == b""

    res = _ledger(store, "doctor", "--fix")
    assert res.returncode == 9, res.stdout
    assert f"problem: {mark}: damaged mark" in res.stdout, res.stdout

    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    assert "history.jsonl accepted as it is" in res.stdout, res.stdout
    assert _ledger(store, "admit", "c").returncode == 0
    log = _ledger(store, "log")
    assert log.returncode == 0, log.stderr
    assert "ledger.dropped" in log.stdout.splitlines()[0], log.stdout
