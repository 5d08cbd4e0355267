"""A `ledger run` killed outright (SIGKILL: the OOM killer, `kill -9`) takes
its command's process group with it (cli/commands/run/watchdog.py), so the
copy a rival starts once the lease is over never runs beside it; a runner
that exits normally leaves no watchdog behind. Fresh `ledger` processes;
every wait is for a state, bounded by the lease the command held."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.cli_support import run_ledger, running, start_ledger

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads process states from /proc"
)

LEASE = 30.0
"""Seconds: the lease the killed runner held; the command must be gone well within it."""


def _pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") or text.isdigit() else None


def _attempt_pid(store: Path) -> int | None:
    res = run_ledger(store, "--json", "state", "job")
    attempts = json.loads(res.stdout).get("attempts") if res.returncode == 0 else None
    return attempts[-1]["pid"] if attempts else None


def _wait_for(what: str, done: object, bound: float) -> None:
    deadline = time.monotonic() + bound
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.parametrize(
    "script",
    [
        "echo $$ > pid; exec sleep 300",  # the command is the process run started
        "echo $$ > pid; while :; do echo tick >> ticks; sleep 0.05; done",  # a shell loop
        "sleep 300 & echo $! > pid; wait",  # a process the command started
    ],
    ids=["exec", "shell-loop", "its-child"],
)
def test_the_command_dies_with_its_runner(tmp_path: Path, script: str) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "job").returncode == 0
    run = ["run", "job", "--owner", "a", "--lease", f"{LEASE:g}s", "--", "sh", "-c", script]
    runner = start_ledger(store, *run, cwd=tmp_path)
    pid_file = tmp_path / "pid"
    try:
        _wait_for("the command started", lambda: _pid(pid_file) is not None, LEASE)
        pid = _pid(pid_file)
        assert pid is not None
        # Told to the watchdog before the attempt's start is recorded (the
        # instant before that is the one the watchdog does not cover).
        _wait_for("the run recorded its command", lambda: _attempt_pid(store) is not None, LEASE)
        assert running(pid)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=LEASE)
        _wait_for("the command outlived its killed runner", lambda: not running(pid), LEASE / 3)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def _watchdogs() -> set[int]:
    """The pids of live watchdog shells (their script's first words)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and running(int(entry)):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"while read -r op g" in cmd:
                found.add(int(entry))
    return found


def test_a_runner_that_exits_leaves_no_watchdog(tmp_path: Path) -> None:
    store = tmp_path / "s"
    before = _watchdogs()  # other tests' runners may be running: only new ones count
    assert run_ledger(store, "admit", "job").returncode == 0
    done = run_ledger(store, "run", "job", "--owner", "a", "--lease", f"{LEASE:g}s", "--", "true")
    assert done.returncode == 0, done.stderr
    _wait_for("a watchdog outlived its runner", lambda: not (_watchdogs() - before), LEASE / 3)
