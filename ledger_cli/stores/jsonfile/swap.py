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

renameat2 is reached through ctypes (Linux, glibc 2.28 or later), whose
import costs about what a few such write-backs do: a process switches to it
after `EXCHANGE_AFTER` unsynced replaces, so a one-shot command keeps
rename(2) and a long-lived writer (`run --drain`, a large batch) saves a
write-back a file. A file system without the call (EINVAL) gets rename(2).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
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
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=src_dir_fd)
            return
        import ctypes

        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            _usable = False  # not on this file system: rename(2) from now on
        elif err != errno.ENOENT:  # ENOENT: no target yet, so a plain rename
            raise OSError(err, os.strerror(err), name)
    os.rename(tmp, name, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
