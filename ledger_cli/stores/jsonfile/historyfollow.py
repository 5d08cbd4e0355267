"""Following history.jsonl (`ledger log --follow`): the lines appended since
the last poll, read from the offset where the last poll stopped, never the
whole file again.

- A poll takes no lock: it opens history.jsonl (through the store directory),
  and when it is the file the last poll read (same inode), reads from the
  offset after the last complete line it returned. A line being appended
  (no newline yet) waits for the next poll; an appender cuts a torn line back
  to a newline, never before the offset (it ends a complete line).
- `ledger prune` replaces the file with a copy without the pruned keys' lines
  (historyrewrite.py): the old file's other lines, byte for byte and in order,
  then whatever is appended after. However many prunes ran since the last
  poll, the file the follower finds is so made from the one it read: the lines
  it returned that are still there, then lines it never read. The follower
  walks both files from their starts, matching each line of the new one to
  the next equal line of the old one up to its offset; the first that has no
  match is the first it never read, and it goes on from there. So nothing is
  printed twice and no line still in the history is skipped, whatever the
  timing; a line a prune removed before the follower read it is not printed
  (the SQL stores' followers do the same: docs/design.md §6.4). Equal lines
  are lines of one key (`--now` can make two), which a prune keeps or drops
  together, so the match pairs them in order; a pruned key gets no line again.
  The walk reads both files once, on a prune, not on every poll.
- The store directory is noted when first seen: when it is gone or another
  directory replaced it, the follow ends with exit 9 naming it (the lines of
  a new store at that path are not this store's continuation).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.historyfile import parse_lines
from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, shown
from ledger_cli.stores.jsonfile.locking import io_errors

if TYPE_CHECKING:
    from collections.abc import Iterator

_BLOCK = 1 << 20


class HistoryFollower:
    """`poll()`: the history entries appended since the last poll (the first
    poll: since the follower was made), oldest first."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._path = shown(root, HISTORY_NAME)
        self._dir: tuple[int, int] | None = None
        """The store directory's (device, inode), once it was seen."""
        self._fd: int | None = None
        self._ino: int | None = None
        self._offset = 0
        self._numbered = 0
        """Lines before the offset (counted from the start, a file the follower
        found: in messages only)."""
        with io_errors(root):
            fd = self._open()
            if fd is not None:
                self._adopt(fd)
                self._offset = _line_start(fd, os.fstat(fd).st_size)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self) -> list[HistoryEntry]:
        with io_errors(self._root):
            fd = self._open()
            if fd is None:
                return []
            if self._fd is not None and os.fstat(fd).st_ino == self._ino:
                os.close(fd)  # the same file: go on from the offset
                return self._read_new()
            if self._fd is not None:  # replaced (a prune): where its unread lines start
                try:
                    self._offset, self._numbered = _resume_at(self._fd, self._offset, fd)
                except BaseException:
                    os.close(fd)
                    raise
            else:  # the file was made since: all of it is new
                self._offset = self._numbered = 0
            self._adopt(fd)
            return self._read_new()

    # -- internals -------------------------------------------------------------------

    def _open(self) -> int | None:
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            if self._dir is not None:
                raise self._gone()
            return None
        try:
            st = os.fstat(root_fd)
            if self._dir is None:
                self._dir = (st.st_dev, st.st_ino)
            elif self._dir != (st.st_dev, st.st_ino):
                raise self._gone()
            return fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, self._path)
        finally:
            os.close(root_fd)

    def _gone(self) -> Exception:
        from ledger_cli.errors import NoStoreError

        return NoStoreError(
            f"ledger: no store at {self._root}: it was removed or replaced while followed"
        )

    def _adopt(self, fd: int) -> None:
        self.close()
        self._fd = fd
        self._ino = os.fstat(fd).st_ino

    def _read_new(self) -> list[HistoryEntry]:
        """The complete lines after the offset; the offset moves past them."""
        assert self._fd is not None
        lines = [line for line, _ in _lines(self._fd, self._offset)]
        out = parse_lines(lines, self._path, self._numbered)
        self._numbered += len(lines)
        self._offset += sum(len(line) + 1 for line in lines)
        return out


def _lines(fd: int, start: int, end: int | None = None) -> Iterator[tuple[bytes, int]]:
    """The complete lines of `fd` from `start` (a line's start) to `end` (a
    line's end; None: the file's end), each with the offset just after it."""
    pos, rest = start, b""
    while end is None or pos < end:
        chunk = os.pread(fd, _BLOCK if end is None else min(_BLOCK, end - pos), pos)
        if not chunk:
            break
        at = pos - len(rest)
        pos += len(chunk)
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()  # incomplete: an append in progress
        for line in lines:
            at += len(line) + 1
            yield line, at


def _resume_at(old: int, offset: int, new: int) -> tuple[int, int]:
    """In `new`, a file that replaced `old` (read up to `offset`): the offset
    of its first line the follower never read, and the number of lines before
    it (the module's note)."""
    returned = _lines(old, 0, offset)
    resume = count = 0
    for line, after in _lines(new, 0):
        for seen, _ in returned:
            if seen == line:
                break
        else:
            break  # no returned line left matches it: never read
        resume, count = after, count + 1
    return resume, count


def _line_start(fd: int, size: int) -> int:
    """The offset just past the last newline before `size` (0: none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        idx = os.pread(fd, pos - start, start).rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0
