"""The JSON store's lock taken two ways: directly with flock(2), or by filelock.

An uncontended acquire flocks `ledger.lock` itself and never imports
filelock; a contended one waits with filelock (docs/design.md §3.2). Both must be the
same kernel lock, so each holder excludes the other, across processes. Every
wait here is for a state (a pipe message, an event), never for a time.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import filelock
import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, fairlock

FORK = multiprocessing.get_context("fork")
T0 = Instant.parse("2024-01-01T00:00:00Z")
TIMEOUT = 60.0


def _rec(key: str) -> TaskState:
    return TaskState(
        key=key, status="pending", sequence=1, created_at=T0, updated_at=T0, created_by="t"
    )


def _lock_path(root: Path) -> str:
    return str(root / fairlock.LOCK_NAME)


def _raw_holder(root: str, conn: Connection) -> None:
    """Hold the store lock the direct way (a batch's first write) until told to stop."""
    store = JsonFileStore(root)
    with store.batch():
        assert store.compare_and_swap("raw", None, _rec("raw"))
        conn.send(store._lock.held_by)
        conn.recv()
    conn.send("released")


def _filelock_holder(root: str, conn: Connection) -> None:
    lock = filelock.FileLock(_lock_path(Path(root)), thread_local=False)
    with lock:
        conn.send("held")
        conn.recv()
    conn.send("released")


def _waiter(root: str, waiting: Any, conn: Connection) -> None:
    """A store write that must wait: report when it starts waiting with filelock."""
    original = fairlock.QueueLock._file_lock

    def announcing(self: fairlock.QueueLock) -> Any:
        waiting.set()
        return original(self)

    fairlock.QueueLock._file_lock = announcing  # type: ignore[method-assign]
    store = JsonFileStore(root, lock_timeout=TIMEOUT)
    with store.batch():
        ok = store.compare_and_swap("waited", None, _rec("waited"))
        conn.send((ok, store._lock.held_by))


def _start(target: Any, *args: Any) -> tuple[Any, Connection]:
    parent, child = FORK.Pipe()
    proc = FORK.Process(target=target, args=(*args, child), daemon=True)
    proc.start()
    return proc, parent


def _finish(proc: Any) -> None:
    proc.join(TIMEOUT)
    if proc.is_alive():
        proc.kill()
        pytest.fail("a lock holder hung")
    assert proc.exitcode == 0


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    store = JsonFileStore(path)
    assert store.compare_and_swap("seed", None, _rec("seed"))
    store.close()
    return path


def test_a_direct_flock_holder_excludes_filelock(root: Path) -> None:
    proc, conn = _start(_raw_holder, str(root))
    assert conn.poll(TIMEOUT)
    assert conn.recv() == "flock"
    with pytest.raises(filelock.Timeout):
        filelock.FileLock(_lock_path(root), thread_local=False).acquire(timeout=0)
    conn.send("release")
    assert conn.recv() == "released"
    _finish(proc)
    lock = filelock.FileLock(_lock_path(root), thread_local=False)
    lock.acquire(timeout=0)  # free again
    lock.release()


def test_a_filelock_holder_excludes_the_store(root: Path) -> None:
    proc, conn = _start(_filelock_holder, str(root))
    assert conn.poll(TIMEOUT) and conn.recv() == "held"
    try:
        impatient = JsonFileStore(root, lock_timeout=0.2)
        with pytest.raises(StoreError, match="locked by another process"):
            impatient.compare_and_swap("k", None, _rec("k"))
        assert impatient.load("k") is None
        impatient.close()

        waiting = FORK.Event()
        waiter, waiter_conn = _start(_waiter, str(root), waiting)
        assert waiting.wait(TIMEOUT), "the waiter never fell back to filelock"
        assert not waiter_conn.poll(0)  # it waits while the holder holds
    finally:
        conn.send("release")
    assert conn.recv() == "released"
    _finish(proc)
    assert waiter_conn.poll(TIMEOUT)
    assert waiter_conn.recv() == (True, "filelock")
    _finish(waiter)
    store = JsonFileStore(root)
    assert store.load("waited") is not None and store.load("k") is None


def test_an_uncontended_write_takes_the_flock_without_importing_filelock(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ledger_cli.engine.instant import Instant\n"
        "from ledger_cli.engine.record import TaskState\n"
        "from ledger_cli.stores.jsonfile import JsonFileStore\n"
        f"s = JsonFileStore({str(tmp_path / 's')!r})\n"
        "t = Instant.parse('2024-01-01T00:00:00Z')\n"
        "with s.batch():\n"
        "    assert s.compare_and_swap('k', None, TaskState(key='k', status='pending',"
        " sequence=1, created_at=t, updated_at=t))\n"
        "    assert s._lock.held_by == 'flock', s._lock.held_by\n"
        "assert s.load('k') is not None\n"
        "assert 'filelock' not in sys.modules, 'an uncontended write imported filelock'\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root, timeout=TIMEOUT)
