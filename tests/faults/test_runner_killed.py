"""A `ledger run` killed outright (SIGKILL: the OOM killer, `kill -9`) takes
its command with it on Linux, so the copy a rival starts once the lease is
over never runs beside it. Fresh `ledger` processes; every wait is for a
state, bounded by the lease the command held."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's"
)

LEASE = 30.0
"""Seconds: the lease the killed runner held; the command must be gone well within it."""


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") or text.isdigit() else None


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
    ],
    ids=["exec", "shell-loop"],
)
def test_the_command_dies_with_its_runner(tmp_path: Path, script: str) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "job").returncode == 0
    run = ["run", "job", "--owner", "a", "--lease", f"{LEASE:g}s", "--", "sh", "-c", script]
    runner = subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), *run],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid_file = tmp_path / "pid"
    try:
        _wait_for("the command started", lambda: _pid(pid_file) is not None, LEASE)
        pid = _pid(pid_file)
        assert pid is not None
        assert _running(pid)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=LEASE)
        _wait_for("the command outlived its killed runner", lambda: not _running(pid), LEASE / 3)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
