"""The JSON store's lock queue (stores/jsonfile/fairlock.py): a waiter sleeps
on its predecessor's node, a FIFO, and wakes when the predecessor leaves it,
when the predecessor dies without a word, and behind an older ledger's
regular-file node too. Separate processes hold the lock (fork); every wait
is for a state (a pipe message, an acquire), bounded only against a hang.
"""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import signal
import stat
import sys
import termios
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from ledger_cli.stores.jsonfile import fairlock
from tests.cli_support import run_ledger

FORK = multiprocessing.get_context("fork")
BOUND = 60.0  # against a hung test, never a timing assertion


def _root(tmp_path: Path) -> tuple[str, int]:
    root = tmp_path / "store"
    root.mkdir()
    return str(root), os.open(root, os.O_RDONLY | os.O_DIRECTORY)


def _hold(root: str, conn: Connection, wake_byte: bool = False) -> None:
    """Take the lock, report the node's mode, hold until told (or killed).
    With `wake_byte`, write a byte into the node while still holding, as the
    previous release did just before its close, and report when the waiter
    has read it away."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    lock = fairlock.QueueLock(root, BOUND)
    lock.acquire(fd)
    node = os.stat(os.path.join(root, fairlock.QUEUE_DIR, lock._node_name))
    conn.send(node.st_mode)
    if wake_byte:
        conn.recv()
        assert lock._node_fd is not None
        os.write(lock._node_fd, b"\0")
        end = time.monotonic() + BOUND
        while _unread(lock._node_fd):
            assert time.monotonic() < end, "the waiter never read the byte"
            time.sleep(0.001)
        conn.send("read")
    conn.recv()
    lock.release()
    conn.send("released")


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe `fd` (FIONREAD)."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4), sys.byteorder)


def _acquire_in_thread(root: str, root_fd: int) -> tuple[fairlock.QueueLock, threading.Event]:
    lock = fairlock.QueueLock(root, BOUND)
    got = threading.Event()

    def take() -> None:
        lock.acquire(root_fd)
        got.set()

    threading.Thread(target=take, daemon=True).start()
    return lock, got


def _queued(root: str, n: int) -> bool:
    """Whether `n` nodes are in the queue (the holder's and the waiters')."""
    names = os.listdir(os.path.join(root, fairlock.QUEUE_DIR))
    return sum(name.startswith(fairlock.NODE_PREFIX) for name in names) >= n


def _wait_queued(root: str, n: int) -> None:
    end = time.monotonic() + BOUND
    while not _queued(root, n):
        assert time.monotonic() < end, f"never {n} nodes in the queue"
        time.sleep(0.005)


def test_a_waiter_wakes_when_its_predecessor_leaves(tmp_path: Path) -> None:
    root, root_fd = _root(tmp_path)
    ours, theirs = FORK.Pipe()
    holder = FORK.Process(target=_hold, args=(root, theirs))
    holder.start()
    assert stat.S_ISFIFO(ours.recv())  # the node a successor sleeps on
    lock, got = _acquire_in_thread(root, root_fd)
    _wait_queued(root, 2)
    assert not got.is_set()  # excluded while the holder holds
    ours.send("go")
    assert ours.recv() == "released"
    assert got.wait(BOUND)
    lock.release()
    holder.join(BOUND)


def test_a_byte_in_the_node_does_not_make_the_waiter_spin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte written into a held node (the previous release's wake-up) is read
    away: the waiter goes back to sleeping on the node's close, checking the
    flock once a RELEASE_CHECK, where it used to poll and flock in a loop."""
    checks = 0
    real = fairlock._flock_nb

    def counted(fd: int, op: int) -> bool:
        nonlocal checks
        if op == fcntl.LOCK_SH:
            checks += 1
        return real(fd, op)

    monkeypatch.setattr(fairlock, "_flock_nb", counted)
    root, root_fd = _root(tmp_path)
    ours, theirs = FORK.Pipe()
    holder = FORK.Process(target=_hold, args=(root, theirs, True))
    holder.start()
    ours.recv()
    lock, got = _acquire_in_thread(root, root_fd)
    _wait_queued(root, 2)
    ours.send("write the byte")
    assert ours.recv() == "read"
    before = checks
    rounds = 5
    time.sleep(rounds * fairlock.RELEASE_CHECK)  # poll(2) never returns early without an event
    assert checks - before <= rounds + 2, checks - before
    assert not got.is_set()
    ours.send("go")
    assert ours.recv() == "released"
    assert got.wait(BOUND)
    lock.release()
    holder.join(BOUND)


def test_a_waiter_wakes_when_its_predecessor_dies(tmp_path: Path) -> None:
    root, root_fd = _root(tmp_path)
    ours, theirs = FORK.Pipe()
    holder = FORK.Process(target=_hold, args=(root, theirs))
    holder.start()
    ours.recv()
    lock, got = _acquire_in_thread(root, root_fd)
    _wait_queued(root, 2)
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)  # its node closed by the kernel
    holder.join(BOUND)
    assert got.wait(BOUND)
    lock.release()


def test_a_waiter_waits_behind_a_regular_file_node(tmp_path: Path) -> None:
    """An older ledger's node is a regular file: its flock is polled."""
    root, root_fd = _root(tmp_path)
    queue = os.path.join(root, fairlock.QUEUE_DIR)
    os.mkdir(queue)
    old = fairlock.NODE_PREFIX + "0" * 24
    node = os.open(os.path.join(queue, old), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(node, fcntl.LOCK_EX)
    with open(os.path.join(queue, fairlock.TAIL_NAME), "w") as tail:
        tail.write(old)
    lock, got = _acquire_in_thread(root, root_fd)
    _wait_queued(root, 2)
    assert not got.wait(0.05)  # still behind the old node (a state check, not a timing)
    os.close(node)
    assert got.wait(BOUND)
    lock.release()


def test_doctor_passes_the_node_a_killed_waiter_left(tmp_path: Path) -> None:
    """A lock queue node is a FIFO by design: not a planted one (a fresh process)."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    os.mkfifo(store / fairlock.QUEUE_DIR / (fairlock.NODE_PREFIX + "1" * 24), 0o600)
    res = run_ledger(store, "doctor")
    assert res.returncode == 0 and "no problems found" in res.stdout, res.stdout + res.stderr
    os.mkfifo(store / fairlock.QUEUE_DIR / "planted", 0o600)
    res = run_ledger(store, "doctor")
    assert res.returncode == 9 and "planted: not a regular file" in res.stdout


def test_without_fifos_the_nodes_are_regular_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system with no FIFOs (vfat: EPERM) still queues, on polled files."""

    def no_fifos(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "mkfifo", no_fifos)
    root, root_fd = _root(tmp_path)
    first = fairlock.QueueLock(root, BOUND)
    first.acquire(root_fd)
    node = os.stat(os.path.join(root, fairlock.QUEUE_DIR, first._node_name))
    assert stat.S_ISREG(node.st_mode)
    lock, got = _acquire_in_thread(root, root_fd)
    _wait_queued(root, 2)
    assert not got.is_set()  # excluded while the first holds
    first.release()
    assert got.wait(BOUND)
    lock.release()
