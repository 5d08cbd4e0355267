"""A JSON store's history.jsonl emptied, or cut from its start, while
history.started says the store keeps one (stores/jsonfile/historymark.py),
as the user meets it: every command a fresh `ledger` process.

Such a history is lost primary data, as a deleted one: a writer refuses it
(exit 9, one line naming the file, nothing written), `log` and `doctor`
report it, `doctor --fix` leaves it, and `doctor --fix --drop-damaged`
accepts the loss (what is left kept in damaged/, a new history whose first
line is `ledger.dropped`), after which writes work again. A prune that drops
the history's first line, and an older store's empty history.started, are
no damage.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import ledger_ok, run_ledger

NOW = "2026-03-04T05:06:07Z"


def _ledger(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A fresh `ledger` process: never a crash (exit 70, a traceback)."""
    res = run_ledger(store, "--now", NOW, *args)
    assert res.returncode != 70 and "Traceback" not in res.stderr, res.stderr
    return res


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("a", "b", "c"):
        ledger_ok(store, "--now", NOW, "admit", key)
    return store


def _emptied(data: bytes) -> bytes:
    return b""


def _first_line_gone(data: bytes) -> bytes:
    return data[data.index(b"\n") + 1 :]


@pytest.mark.parametrize("cut", [_emptied, _first_line_gone], ids=["emptied", "head-cut"])
def test_an_emptied_or_cut_history_is_lost_data(
    tmp_path: Path, cut: Callable[[bytes], bytes]
) -> None:
    store = _store(tmp_path)
    history = store / "history.jsonl"
    left = cut(history.read_bytes())
    history.write_bytes(left)

    res = _ledger(store, "admit", "d")
    assert res.returncode == 9, res.stderr
    assert len(res.stderr.splitlines()) == 1 and "history.jsonl" in res.stderr, res.stderr
    assert _ledger(store, "state", "d").returncode != 0, "the refused admit wrote its record"
    res = _ledger(store, "log")
    assert res.returncode == 9 and "history.jsonl" in res.stderr, res.stderr
    for args in (("doctor",), ("doctor", "--fix")):
        res = _ledger(store, *args)
        problems = [ln for ln in res.stdout.splitlines() if ln.startswith("problem: ")]
        assert res.returncode == 9, (args, res.stdout)
        assert len(problems) == 1 and "history.jsonl" in problems[0], (args, res.stdout)
    assert history.read_bytes() == left, "the damaged history was written to"

    res = _ledger(store, "doctor", "--fix", "--drop-damaged")
    assert res.returncode == 0 and "fixed: " in res.stdout, res.stdout
    assert [p.read_bytes() for p in (store / "damaged").iterdir()] == [left]
    assert b"ledger.dropped" in history.read_bytes().partition(b"\n")[0]
    assert _ledger(store, "doctor").returncode == 0
    assert _ledger(store, "admit", "d").returncode == 0
    assert _ledger(store, "log").returncode == 0


def test_a_prune_of_the_first_line_is_no_damage(tmp_path: Path) -> None:
    store = tmp_path / "store"
    past = "2026-01-01T00:00:00Z"
    ledger_ok(store, "--now", past, "admit", "old")
    ledger_ok(store, "--now", past, "claim", "old", "--owner", "w", "--lease", "60s")
    ledger_ok(store, "--now", past, "complete", "old", "--owner", "w", "--fence", "1")
    ledger_ok(store, "--now", NOW, "admit", "new")
    ledger_ok(store, "--now", NOW, "prune", "--older-than", "1d")
    assert b'"old"' not in (store / "history.jsonl").read_bytes()
    assert _ledger(store, "doctor").returncode == 0
    assert _ledger(store, "admit", "newer").returncode == 0
    assert _ledger(store, "log").returncode == 0


def test_an_older_stores_empty_mark_is_filled_in(tmp_path: Path) -> None:
    """An older release's history.started is empty: no check until the next
    append writes the mark, then an emptied history is refused."""
    store = _store(tmp_path)
    (store / "history.started").write_bytes(b"")
    assert _ledger(store, "doctor").returncode == 0
    assert _ledger(store, "admit", "d").returncode == 0
    assert (store / "history.started").read_bytes() != b""
    (store / "history.jsonl").write_bytes(b"")
    assert _ledger(store, "admit", "e").returncode == 9
