"""Following history.jsonl (`ledger log --follow`): the lines appended since
the last poll, read from the offset where the last poll stopped, never the
whole file again.

- A poll takes no lock: it opens history.jsonl (through the store directory),
  and when it is the file the last poll read (same inode), reads from the
  offset after the last complete line it returned. A line being appended
  (no newline yet) waits for the next poll; an appender cuts a torn line back
  to a newline, never before the offset (it ends a complete line).
- `ledger prune` replaces the file with a copy without the pruned keys' lines
  (historyfile.py): every line the old file held, in order, then whatever is
  appended after. The follower reads the old inode (its descriptor stays open)
  to its end, then finds in the new file the last line it returned and goes
  on after it. When that line was itself pruned, it goes on from the end of
  the new file as it is then (lines appended between the rename and that
  poll would be skipped: a prune runs rarely, and only this follows).
"""

from __future__ import annotations

import os

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.historyfile import parse_lines
from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, shown
from ledger_cli.stores.jsonfile.locking import io_errors

_BLOCK = 1 << 20


class HistoryFollower:
    """`poll()`: the history entries appended since the last poll (the first
    poll: since the follower was made), oldest first."""

    def __init__(self, root: str) -> None:
        self._root = root
        self._path = shown(root, HISTORY_NAME)
        self._fd: int | None = None
        self._ino: int | None = None
        self._offset = 0
        self._last: bytes | None = None
        """The last complete line returned (or skipped at the start): the anchor
        in a file a prune rewrote."""
        self._numbered = 0
        with io_errors(root):
            fd = self._open()
            if fd is not None:
                self._adopt(fd)
                size = os.fstat(fd).st_size
                self._offset = self._line_start(fd, size)
                self._last = self._line_before(fd, self._offset)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def poll(self) -> list[HistoryEntry]:
        with io_errors(self._root):
            out: list[HistoryEntry] = []
            fd = self._open()
            if fd is None:
                return out
            if fd is not None and self._fd is not None and os.fstat(fd).st_ino == self._ino:
                os.close(fd)  # the same file: go on from the offset
                out.extend(self._read_new())
                return out
            if self._fd is not None:
                out.extend(self._read_new())  # the old inode to its end: no more lands there
                self._adopt(fd)
                self._offset = self._resume_at(fd)
            else:
                self._adopt(fd)  # the file was made since: all of it is new
                self._offset = 0
            out.extend(self._read_new())
            return out

    # -- internals -------------------------------------------------------------------

    def _open(self) -> int | None:
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return None
        try:
            return fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, self._path)
        finally:
            os.close(root_fd)

    def _adopt(self, fd: int) -> None:
        self.close()
        self._fd = fd
        self._ino = os.fstat(fd).st_ino

    def _read_new(self) -> list[HistoryEntry]:
        """The complete lines after the offset; the offset moves past them."""
        assert self._fd is not None
        out: list[HistoryEntry] = []
        rest = b""
        while chunk := os.pread(self._fd, _BLOCK, self._offset + len(rest)):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()  # incomplete: an append in progress
            if lines:
                out.extend(parse_lines(lines, self._path, self._numbered))
                self._numbered += len(lines)
                self._offset += sum(len(line) + 1 for line in lines)
                self._last = lines[-1]
        return out

    @staticmethod
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

    def _line_before(self, fd: int, end: int) -> bytes | None:
        """The complete line that ends at `end` (just before it), or None."""
        if end <= 0:
            return None
        start = self._line_start(fd, end - 1)
        return os.pread(fd, end - 1 - start, start)

    def _resume_at(self, fd: int) -> int:
        """In a file that replaced the one followed: the offset after the last
        line returned, found by its bytes (a prune's copy keeps them); else
        the end of the file's complete lines."""
        size = os.fstat(fd).st_size
        end = self._line_start(fd, size)
        if self._last is None:
            return 0
        needle = b"\n" + self._last + b"\n"
        head = needle[1:]
        found = len(head) if os.pread(fd, len(head), 0) == head and len(head) <= end else -1
        tail = b""
        pos = 0
        while pos < end:  # a rewrite is rare: read it in blocks, keep the last match
            chunk = os.pread(fd, min(_BLOCK, end - pos), pos)
            if not chunk:
                break
            window = tail + chunk
            at = window.rfind(needle)
            if at >= 0:
                found = pos - len(tail) + at + len(needle)
            tail = window[-(len(needle) - 1) :]
            pos += len(chunk)
        return found if found >= 0 else end
