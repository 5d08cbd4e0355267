"""`ledger prune` drops the lines of the keys it pruned from history.jsonl
(historyfile.py) by rewriting the file (`drop_keys_briefly`), mostly outside
the lock (docs/design.md §5.4 "Short lock holds"):

1. under a brief hold, note the file (its inode) and its complete size S: the
   bytes before S never change in that inode (appends go after S; a torn tail
   is cut back to S at most; a journal's `history_at` is at least S; a file
   that ends mid-line under the lock is damage, refused as writers refuse it), so
2. outside the lock, the kept lines before S are copied into an unnamed file
   (O_TMPFILE: nothing to sweep, nothing left however the process ends),
   fsynced; while the lines appended meanwhile exceed CATCH_UP_BYTES, they
   are copied the same way, one more brief hold at a time;
3. under the last hold, the lines appended since are copied, the copy is
   fsynced, linked under a temporary name and renamed over history.jsonl,
   and the directory is fsynced before the lock goes.
A crash before the rename leaves the old file (and perhaps a temporary name,
swept by the next holder); after it, the new one, holding every line that the
old one had when the lock was last taken, but the dropped ones. Appends wait
for the lock, so none lands in the old file after its last copy. Another
prune's rename in between (a new inode) makes the rewrite start again. Where
O_TMPFILE or /proc is missing, the file is rewritten under one hold
(`drop_keys`). Only a prune imports this module."""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import fsutil, historyfile, historymark, spares
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, shown

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    Locked = Callable[[], AbstractContextManager[int | None]]
    """Takes the store lock for a `with` block; yields the root directory's fd
    (None: no store)."""

CATCH_UP_BYTES = 1 << 20
"""At most this much history appended during the copy is copied under the
lock's last hold (about 10 ms); more is copied outside it first."""
ROUNDS = 8
"""Copies outside the lock before the last hold takes whatever is left."""
ATTEMPTS = 4
"""Rewrites begun again after another prune replaced the file; then one under
the lock."""
BLOCK = 4 << 20
"""Bytes of history read at a time while copying."""


def drop_keys_briefly(root: str, locked: Locked, keys: set[str]) -> None:
    """`drop_keys`, the copy made outside the lock (this module's note); each
    hold costs a stat, the tail appended meanwhile and the rename's fsyncs."""
    if not keys:
        return
    for _ in range(ATTEMPTS):
        if _rewrite(root, locked, keys):
            return
    with locked() as root_fd:  # others kept replacing the file: one hold
        if root_fd is not None:
            drop_keys(root, root_fd, keys)


def _rewrite(root: str, locked: Locked, keys: set[str]) -> bool:
    """One rewrite; False when another rewrite replaced the file meanwhile."""
    path = shown(root, HISTORY_NAME)
    src = out = None
    try:
        with locked() as root_fd:
            if root_fd is None:
                return True
            src = fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, path)
            if src is None:
                return True
            end = _complete_size(src, path)
            if end == 0:
                return True
            out = _unnamed_file(root_fd)
            if out is None:  # no O_TMPFILE here: the whole rewrite under this hold
                drop_keys(root, root_fd, keys)
                return True
        copied = 0
        for rounds in range(ROUNDS + 1):
            if end - copied > CATCH_UP_BYTES and rounds < ROUNDS:
                _copy_kept(src, out, copied, end, keys, path)  # outside the lock
                _fsync(out, path)
                copied = end
            with locked() as root_fd:
                if root_fd is None or not _same_file(root_fd, src):
                    return False
                end = _complete_size(src, path)
                if end - copied > CATCH_UP_BYTES and rounds < ROUNDS:
                    continue  # much arrived meanwhile: copy it outside the lock first
                _copy_kept(src, out, copied, end, keys, path)
                _fsync(out, path)
                swap = functools.partial(_swap_in, root, root_fd, out, path)
                historymark.around_swap(root, root_fd, swap)
                return True
        raise AssertionError("unreachable: the last round renames")  # pragma: no cover
    finally:
        fsutil.close_all((src, out))


def drop_keys(root: str, root_fd: int, keys: set[str]) -> None:
    """Rewrite history.jsonl without the lines of `keys` (pruned), durably."""
    path = shown(root, HISTORY_NAME)
    data = fsutil.read_file(root_fd, HISTORY_NAME, path)
    if not data:
        return
    if not data.endswith(b"\n"):
        raise historyfile.damaged_history(path)  # as _complete_size
    kept = []
    for line in data.split(b"\n")[:-1]:
        try:
            key = json.loads(line.decode("utf-8"))["key"]
        except (KeyError, TypeError, UnicodeDecodeError, ValueError):
            raise fail(path, "corrupt history entry; refusing to rewrite it") from None
        if key not in keys:
            kept.append(line + b"\n")

    def swap() -> None:
        fsutil.replace_file(root_fd, HISTORY_NAME, b"".join(kept), path, sync=True)
        fsutil.fsync_fd(root_fd, root)

    historymark.around_swap(root, root_fd, swap)


def _complete_size(fd: int, path: str) -> int:
    """The file's size, under the lock: the replay that took it cut a crash's
    torn line, so one left is damage, refused as every writer refuses it
    (historyfile.py), never cut."""
    size = historyfile.complete_size(fd)
    if size != os.fstat(fd).st_size:
        raise historyfile.damaged_history(path)
    return size


def _same_file(root_fd: int, fd: int) -> bool:
    """Whether history.jsonl is still the file open as `fd`."""
    try:
        st = os.stat(HISTORY_NAME, dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _unnamed_file(root_fd: int) -> int | None:
    """An unnamed file (O_TMPFILE) in the root directory, or None where there is none."""
    if not spares.unnamed_files():
        return None
    try:
        fd = spares.unnamed_file(root_fd)
    except OSError:  # not on this file system
        return None
    try:
        if fsutil.needs_fchmod():  # O_TMPFILE's mode went through the umask
            os.fchmod(fd, fsutil.FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy_kept(src: int, out: int, start: int, end: int, keys: set[str], path: str) -> None:
    """Append to `out` the lines of bytes [start, end) of `src` (whole lines) whose
    key is not in `keys`."""
    pos, rest = start, b""
    try:
        while pos < end:
            chunk = os.pread(src, min(BLOCK, end - pos), pos)
            if not chunk:
                raise fail(path, "is shorter than it was under the lock; refusing to rewrite it")
            pos += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            kept = [line + b"\n" for line in lines if _key_of(line, path) not in keys]
            if kept:
                fsutil.write_all(out, b"".join(kept))
    except OSError as exc:
        raise fail(path, "cannot copy", exc) from None
    assert rest == b"", "a copy ends at a line's end"


def _key_of(line: bytes, path: str) -> str:
    try:
        return str(json.loads(line.decode("utf-8"))["key"])
    except (KeyError, TypeError, UnicodeDecodeError, ValueError):
        raise fail(path, "corrupt history entry; refusing to rewrite it") from None


def _fsync(fd: int, path: str) -> None:
    try:
        os.fsync(fd)
    except OSError as exc:
        raise fail(path, "cannot fsync the rewritten history", exc) from None


def _swap_in(root: str, root_fd: int, fd: int, path: str) -> None:
    _link_over(root_fd, fd, path)
    fsutil.fsync_fd(root_fd, root)


def _link_over(root_fd: int, fd: int, path: str) -> None:
    """Name the unnamed file `fd` history.jsonl: linked under a temporary name
    (spares.link_temp), renamed over the old file."""
    tmp = None
    try:
        tmp = spares.link_temp(fd, root_fd, HISTORY_NAME)
        os.replace(tmp, HISTORY_NAME, src_dir_fd=root_fd, dst_dir_fd=root_fd)
    except BaseException as exc:
        fsutil.discard_temp(root_fd, tmp, path, exc, "cannot replace")
