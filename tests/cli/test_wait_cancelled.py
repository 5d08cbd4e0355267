"""`ledger wait` and `tree --json` on a cancelled task (docs/design.md §6.3,
§7.5): the cancel is its last ending, so neither reports an earlier attempt's
exit status, nor the signal that stopped a run the cancel fenced off.
Through the installed `ledger` in fresh processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.cli_support import run_ledger, start_ledger

HANG = 60.0  # a bound for a hung test, never a timing assertion


def ok(url: str | Path, *args: str) -> str:
    done = run_ledger(url, "--actor", "tester", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_retried_then_cancelled_task_waits_as_cancelled(url: str) -> None:
    ok(url, "admit", "x")
    assert run_ledger(url, "run", "x", "--owner", "w", "--lease", "1m", "--", "false").returncode
    ok(url, "retry", "x")
    ok(url, "cancel", "x", "--reason", "no longer needed")
    done = run_ledger(url, "wait", "x")
    assert done.returncode == 1
    assert done.stdout == "failed x (cancelled by tester: no longer needed)\n"
    doc = json.loads(run_ledger(url, "--json", "wait", "x").stdout)
    assert doc["settled"] == [{"key": "x", "status": "failed", "blocked_by": None, "exit": None}]
    (failed,) = json.loads(ok(url, "--json", "tree"))["failed"]
    assert (failed["exit"], failed["signal"], failed["timed_out"]) == (None, None, False)
    # A failure of its own after a new run is that run's again.
    ok(url, "retry", "x")
    assert run_ledger(url, "run", "x", "--owner", "w", "--lease", "1m", "--", "false").returncode
    assert run_ledger(url, "wait", "x").stdout == "failed x (exit 1)\n"


def test_a_run_stopped_by_cancel_waits_as_cancelled(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ok(store, "admit", "a")
    run = start_ledger(
        store, "run", "a", "--owner", "w", "--lease", "2s", "--", "sleep", "60", cwd=tmp_path
    )
    try:
        end = time.monotonic() + HANG
        while not json.loads(ok(store, "--json", "state", "a"))["attempts"]:
            assert time.monotonic() < end, "the run never started its attempt"
            time.sleep(0.05)
        ok(store, "cancel", "a")
        assert run.wait(timeout=HANG) == 5  # fenced off: its lease is lost
    finally:
        run.kill()
        run.wait()
    (attempt,) = json.loads(ok(store, "--json", "state", "a"))["attempts"]
    assert attempt["signal"] == "SIGTERM"  # what stopped it, not why
    done = run_ledger(store, "wait", "a")
    assert (done.returncode, done.stdout) == (1, "failed a (cancelled by tester)\n")
