"""Waiting for states, not for times, in the tests that involve leases and processes.

A test that sleeps "a bit more than the lease" passes or fails with the speed
of the machine (a slow start-up makes up the difference, a fast one does not).
These helpers wait for what the test needs instead: the clock past the lease
the store actually recorded, a process stopped while it holds no lock, any
condition polled up to a deadline that only a hang reaches.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.jsonfile import JsonFileStore

HANG = 120.0
"""Seconds after which a wait is a hang (a failure), never a normal outcome."""


def wait_until(condition: Callable[[], object], what: str, timeout: float = HANG) -> None:
    """Poll `condition` until it is true; AssertionError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:g}s for {what}"
        time.sleep(0.01)


def lease_until(store: str | Path, key: str) -> Instant:
    rec = JsonFileStore(store).load(key)
    assert rec is not None and rec.status == "claimed", rec
    return rec.lease_until


def wait_past_lease(store: str | Path, key: str) -> Instant:
    """Return once the system clock (the JSON store's clock) is past the lease that
    `key` holds now, however long that lease is. Returns the lease's end."""
    until = lease_until(store, key)
    wait_until(lambda: Instant.now() > until, f"the lease on {key} to run out ({until})")
    return until


def _state_letter(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def wait_stopped(pid: int) -> None:
    wait_until(lambda: _state_letter(pid) == "T", f"process {pid} to stop")


def store_lock_free(store: str | Path) -> bool:
    """Nobody holds the JSON store's lock (the flock on ledger.lock) at this instant."""
    path = Path(store) / "ledger.lock"
    if not path.exists():
        return True
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # drops the probe's flock, if it got one
    return True


def stop_outside_store_lock(pid: int, store: str | Path) -> None:
    """SIGSTOP `pid` at a moment it does not hold the store lock (a process stopped
    mid-write would make every other one wait for the lock, not for its lease)."""

    def stopped_unlocked() -> bool:
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)
        if store_lock_free(store):
            return True
        os.kill(pid, signal.SIGCONT)
        return False

    wait_until(stopped_unlocked, f"process {pid} to stop outside the store lock")


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (Linux)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except FileNotFoundError:
        return []


def wait_for_file(path: Path, timeout: float = HANG) -> str:
    """The stripped text of `path` once it exists and is not empty."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


HANGUP_IGNORED = signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
"""This process ignores SIGHUP (run under nohup): so do the `ledger` processes
it starts, and `ledger run` keeps an ignored SIGHUP ignored, as nohup asks."""

HANGUP = pytest.param(
    signal.SIGHUP,
    id="HUP",
    marks=pytest.mark.skipif(HANGUP_IGNORED, reason="SIGHUP ignored here (nohup)"),
)
"""SIGHUP as a signal test's parameter (skipped where it is ignored)."""
