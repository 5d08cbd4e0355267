"""`ledger run --next --drain` records a task's outcome and claims the next
task in one unit (one commit, one sync: tests/storage/test_fsync_counts.py).
In this process, so that a signal can be sent from inside that unit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import ledger_cli.cli.commands.run as run_command
from tests.faults_support import invoke


def _state(store: Path, key: str) -> dict[str, Any]:
    res = invoke(store, "--json", "state", key)
    assert res.code == 0, res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_a_signal_in_the_outcome_unit_gives_the_next_task_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM arrives while the unit that completes `a` claims `b`: `a` is
    completed, `b` released (pending, no attempt left), `c` untouched; 143."""
    store = tmp_path / "store"
    for key in ("a", "b", "c"):
        assert invoke(store, "admit", key).code == 0
    real = run_command.claim_in_unit

    def claim_then_signal(*args: Any, **kwargs: Any) -> Any:
        got = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return got

    monkeypatch.setattr(run_command, "claim_in_unit", claim_then_signal)
    argv = ("run", "--next", "--drain", "--owner", "w", "--lease", "60s", "--", "true")
    res = invoke(store, *argv)
    assert res.code == 128 + signal.SIGTERM, res.stderr
    a, b, c = (_state(store, key) for key in ("a", "b", "c"))
    assert a["Status"] == "completed"
    assert b["Status"] == "pending" and b["attempts"] == []
    assert c["Status"] == "pending" and c["Fence"] == 0
    log = invoke(store, "--json", "log", "b")
    assert [e["event"] for e in json.loads(log.stdout)] == [
        "ledger.admitted",
        "ledger.claimed",
        "ledger.released",
    ]


def test_the_next_task_claimed_with_an_outcome_runs_under_its_own_fence(
    tmp_path: Path,
) -> None:
    """Each task of a drain runs once, with its own fence and one attempt."""
    store = tmp_path / "store"
    for key in ("a", "b", "c"):
        assert invoke(store, "admit", key).code == 0
    argv = ("run", "--next", "--drain", "--owner", "w", "--lease", "60s", "--", "true")
    assert invoke(store, *argv).code == 0
    for key in ("a", "b", "c"):
        doc = _state(store, key)
        assert doc["Status"] == "completed" and doc["Fence"] == 1
        assert [att["n"] for att in doc["attempts"]] == [1]
