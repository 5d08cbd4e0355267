"""A JSON store's history.jsonl that ends mid-line, as the user meets it.

A crash's torn line is covered by a wal.log frame, whose replay (by the next
holder of the store lock) cuts it and appends the line again: nothing to
report. A torn line no replay covers is damage every writer refuses: `log`
and `doctor` report it (exit 9, naming the file and the remedy), `doctor
--fix` keeps it, and `doctor --fix --drop-damaged` accepts its loss
explicitly (the torn bytes kept in damaged/, a `ledger.dropped` line), after
which writes work again. Every command is a fresh `ledger` process
(tests/cli_support.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile import wal
from tests.cli_support import ledger_ok, run_ledger


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh `ledger` process: never a crash (exit 70, a traceback)."""
    res = run_ledger(store, *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def _store(tmp_path: Path) -> Path:
    """Two admits: their frames are in wal.log (no checkpoint yet)."""
    store = tmp_path / "store"
    ledger_ok(store, "admit", "a")
    ledger_ok(store, "admit", "b", "--task", '{"n": 2}')
    return store


def _tear(store: Path, how: str) -> tuple[bytes, bytes]:
    """Damage history.jsonl; (the whole lines left, the torn bytes after them)."""
    history = store / "history.jsonl"
    data = history.read_bytes()
    torn = data[:-5] if how == "cut" else b"{}"
    history.write_bytes(torn)
    whole = torn[: torn.rfind(b"\n") + 1]
    return whole, torn[len(whole) :]


def _refused(res: subprocess.CompletedProcess[str], store: Path) -> None:
    assert res.returncode == 9, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.count("\n") == 1, res.stderr
    assert f"{store}/history.jsonl: damaged history (it ends mid-line" in res.stderr
    assert "ledger doctor --fix --drop-damaged" in res.stderr


@pytest.mark.parametrize("how", ["cut", "no-newline"])
def test_a_torn_history_is_reported_by_log_and_doctor_and_kept_by_fix(
    tmp_path: Path, how: str
) -> None:
    store = _store(tmp_path)
    _tear(store, how)
    damaged = (store / "history.jsonl").read_bytes()
    _refused(_ledger(store, "admit", "c"), store)
    _refused(_ledger(store, "log"), store)
    _refused(_ledger(store, "log", "a"), store)
    for args in (("doctor",), ("doctor", "--fix")):
        res = _ledger(store, *args)
        assert res.returncode == 9, (args, res.stdout)
        problems = [line for line in res.stdout.splitlines() if line.startswith("problem: ")]
        assert len(problems) == 1, res.stdout
        assert f"{store}/history.jsonl: damaged history" in problems[0]
        assert "ledger doctor --fix --drop-damaged" in problems[0]
    assert (store / "history.jsonl").read_bytes() == damaged
    assert not (store / "damaged").exists()
    report = json.loads(_ledger(store, "--json", "doctor").stdout)
    assert any("history.jsonl: damaged history" in p for p in report["problems"]), report


@pytest.mark.parametrize("how", ["cut", "no-newline"])
def test_drop_damaged_cuts_the_torn_line_keeps_its_bytes_and_says_so(
    tmp_path: Path, how: str
) -> None:
    store = _store(tmp_path)
    whole, torn = _tear(store, how)
    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0, res.stdout
    kept = store / "damaged" / "history.jsonl.torn.1"
    assert f"fixed: cut the torn last line of {store}/history.jsonl" in res.stdout
    assert str(kept) in res.stdout
    assert kept.read_bytes() == torn
    assert kept.stat().st_mode & 0o777 == 0o600
    history = (store / "history.jsonl").read_bytes()
    assert history.startswith(whole) and history.endswith(b"\n")
    dropped = json.loads(history[len(whole) :])
    assert dropped["event"] == "ledger.dropped" and dropped["key"] == ""
    assert str(kept) in dropped["data"]
    assert _ledger(store, "admit", "c").returncode == 0
    log = _ledger(store, "--json", "log")
    assert log.returncode == 0, log.stderr
    events = [(e["event"], e["key"]) for e in json.loads(log.stdout)]
    assert events[-2:] == [("ledger.dropped", ""), ("ledger.admitted", "c")]
    assert _ledger(store, "doctor").returncode == 0
    again = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert again.returncode == 0 and "fixed:" not in again.stdout, again.stdout


@pytest.mark.skipif(not wal.enabled(), reason="wal.log needs a boot id (Linux)")
def test_a_torn_line_a_replay_covers_is_no_damage(tmp_path: Path) -> None:
    """As after a power cut: the history torn inside a line whose wal.log
    frame the next opener applies again (no wal.applied: a restart). The
    replay cuts the torn line and appends it whole: nothing is reported."""
    store = _store(tmp_path)
    before = (store / "history.jsonl").read_bytes()
    _tear(store, "cut")
    (store / wal.APPLIED_NAME).unlink()
    log = _ledger(store, "log")
    assert log.returncode == 0, log.stderr
    assert (store / "history.jsonl").read_bytes() == before
    res = _ledger(store, "doctor")
    assert res.returncode == 0 and "problem:" not in res.stdout, res.stdout
    assert _ledger(store, "admit", "c").returncode == 0
