"""Putting a written temporary file in place of its target.

A file whose bytes were fsynced is renamed over its target (rename(2)). A
file written unsynced goes in by renameat2(RENAME_EXCHANGE), and the old
file, now under the temporary name, is unlinked. Why: ext4 in its default
mode (auto_da_alloc) starts writeback of a file renamed over an existing
name, a safeguard for programs that never fsync, and that write-back is
the largest cost of a drained task under the store lock (docs/performance.md,
"Where a drained task's time goes"). The store needs no such safeguard: a
file it writes unsynced is described by a synced wal.log frame, or made
durable by a syncfs before the write is acknowledged (docs/design.md §3.2).
Exchanging the names is as atomic for a reader as a rename (the name holds
the old file or the new, whole) and starts no writeback. A crash between
the exchange and the unlink leaves a `.tmp` file, which a later lock
holder removes as any crash's leftover.

The old file is unlinked by a thread of the writer (`retire`), not under
the store lock: on a file system that discards freed blocks (ext4 mounted
with `discard`, without a journal) the unlink of a file whose bytes were
written back waits for the discard, ~3 ms (benchmarks/bench_unlink.py), and
a claim replaces such a file (its record, written back since its
admission). Nothing reads a `.tmp` name but the sweep of leftovers, which
may remove it first; the process waits for its retired files at exit.

renameat2 is reached through ctypes (Linux, glibc 2.28 or later), whose
import costs about what a few such write-backs do: a process switches to it
after `EXCHANGE_AFTER` unsynced replaces, so a one-shot command keeps
rename(2) and a long-lived writer (`run --drain`, a large batch) saves a
write-back a file. A file system without the call (EINVAL) gets rename(2).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

EXCHANGE_AFTER = 8
"""Unsynced replaces a process makes by rename(2) before it loads renameat2."""
RENAME_EXCHANGE = 2

_unsynced = 0
_renameat2: Callable[[int, bytes, int, bytes, int], int] | None = None
_usable = sys.platform.startswith("linux")


def _load() -> Callable[[int, bytes, int, bytes, int], int] | None:
    global _renameat2, _usable
    if not _usable:
        return None
    if _renameat2 is None:
        import ctypes

        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError):  # a C library without it
            _usable = False
            return None
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
        _renameat2 = fn
    return _renameat2


def into_place(tmp: str, name: str, *, src_dir_fd: int, dst_dir_fd: int, synced: bool) -> None:
    """Put `tmp` (in `src_dir_fd`) in place of `name` (in `dst_dir_fd`)."""
    if synced:
        os.replace(tmp, name, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    else:
        unsynced(tmp, name, src_dir_fd, dst_dir_fd)


def unsynced(tmp: str, name: str, src_dir_fd: int, dst_dir_fd: int) -> None:
    """`into_place` for a file whose bytes are not synced (see the module's note)."""
    global _unsynced, _usable
    _unsynced += 1
    fn = _load() if _unsynced > EXCHANGE_AFTER else None
    if fn is not None:
        if fn(src_dir_fd, os.fsencode(tmp), dst_dir_fd, os.fsencode(name), RENAME_EXCHANGE) == 0:
            # The old file; if it stays, a leftover .tmp the next lock holder removes.
            retire(src_dir_fd, tmp)
            return
        import ctypes

        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            _usable = False  # not on this file system: rename(2) from now on
        elif err != errno.ENOENT:  # ENOENT: no target yet, so a plain rename
            raise OSError(err, os.strerror(err), name)
    os.rename(tmp, name, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)


_retired: list[tuple[int, str]] = []
_pending = 0
_wake: threading.Condition | None = None
_thread: threading.Thread | None = None


def retire(dir_fd: int, name: str) -> None:
    """Unlink `name` in `dir_fd` from the process's retiring thread (started
    on first use), which holds its own duplicate of `dir_fd` until then."""
    global _wake, _pending, _thread
    if _wake is None:
        _wake = threading.Condition()
        _thread = threading.Thread(target=_unlink_retired, name="ledger-retire", daemon=True)
        _thread.start()
        atexit.register(wait_retired)
    try:
        fd = os.dup(dir_fd)
    except OSError:  # no descriptor to spare: unlink it here
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        return
    with _wake:
        _retired.append((fd, name))
        _pending += 1
        _wake.notify_all()


def _unlink_retired() -> None:
    global _pending
    wake = _wake
    assert wake is not None
    while True:
        with wake:
            while not _retired:
                wake.wait()
            fd, name = _retired.pop()
        try:
            # Gone already (a sweep took it), or not removable: a leftover the
            # next sweep removes. Linux closes a descriptor whose close fails.
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        finally:
            with wake:
                _pending -= 1
                wake.notify_all()


def wait_retired() -> None:
    """Return once every file retired so far is unlinked (at exit, and in tests)."""
    if _wake is None:
        return
    with _wake:
        while _pending and _thread is not None and _thread.is_alive():
            _wake.wait(0.1)  # a bound only against a thread that died


def _forget_retired() -> None:
    """In a forked child: the thread did not come along; the parent unlinks its own."""
    global _wake, _pending, _thread
    _wake, _pending, _thread = None, 0, None
    _retired.clear()


os.register_at_fork(after_in_child=_forget_retired)
