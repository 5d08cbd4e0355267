"""history.started: the mark that the store keeps a history (historyfile.py),
and what the history's first line was, so an emptied or cut-short
history.jsonl is lost data, not a history that starts later.

The mark holds one line, `<length> <sha256>`: the byte length (newline
included) and the SHA-256 of history.jsonl's first line. A history that
is shorter, or does not start with that line, was emptied, cut or replaced
(writers refuse it, `log` and `doctor` report it: exit 9). The check costs
a writer one small read of the mark and one of the first line, and one hash.

- An empty mark (written by an older release) or a length of 0 (a history
  that prune emptied) checks nothing; the next append writes the mark
  from the history's first line, as it does for a missing mark.
- Prune (historyrewrite.py) may drop the first line: before it renames the
  rewritten file into place it adds a mark of length 0 (either file passes,
  so a crash in between is no damage, and the next append writes the mark
  again), and after the rename the mark is the new first line's
  (`around_swap`).
"""

from __future__ import annotations

import os
from hashlib import sha256
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.layout import HISTORY_MARK, HISTORY_NAME, shown

if TYPE_CHECKING:
    from collections.abc import Callable

Mark = tuple[int, str]
"""(length of the first line, newline included; its SHA-256 hex)."""

_FIRST = 4096


def read(root_fd: int) -> list[Mark] | None:
    """The marks history.started holds; None when it is missing; [] when it
    holds none this release can check (an older release's empty mark)."""
    try:
        fd = os.open(HISTORY_MARK, fsutil.READ_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, 1024)
    finally:
        os.close(fd)
    marks: list[Mark] = []
    for line in data.decode("ascii", "replace").splitlines():
        length, _, digest = line.partition(" ")
        if length.isdigit() and len(digest) == 64:
            marks.append((int(length), digest))
    return marks


def checks(marks: list[Mark] | None) -> bool:
    """Whether `marks` say what the history starts with (else: write them)."""
    return bool(marks) and all(length > 0 for length, _ in marks or [])


def starts_as_marked(fd: int, size: int, marks: list[Mark]) -> bool:
    """Whether the history open as `fd` (`size` bytes) starts with a marked line."""
    for length, digest in marks:
        if length == 0:
            return True
        if length <= size and sha256(os.pread(fd, length, 0)).hexdigest() == digest:
            return True
    return False


def first_line(fd: int) -> bytes:
    """The first whole line of the file open as `fd` (b"" when it has none)."""
    data = b""
    while b"\n" not in data:
        chunk = os.pread(fd, _FIRST, len(data))
        if not chunk:
            return b""
        data += chunk
    return data[: data.index(b"\n") + 1]


def mark_of(line: bytes) -> Mark:
    return len(line), sha256(line).hexdigest()


def write(root: str, root_fd: int, marks: list[Mark]) -> None:
    """Replace history.started with `marks`, durably ([]: an empty mark,
    which checks nothing until the next append writes one)."""
    data = b"".join(b"%d %s\n" % (length, digest.encode()) for length, digest in marks)
    fsutil.replace_file(root_fd, HISTORY_MARK, data, shown(root, HISTORY_MARK), sync=True)
    fsutil.fsync_fd(root_fd, root)


def around_swap(root: str, root_fd: int, swap: Callable[[], None]) -> None:
    """`swap` (prune's rename of a rewritten history over history.jsonl),
    the mark checking nothing until it is done (a crash in between: the next
    append writes it), then the new first line's."""
    marks = read(root_fd)
    if marks is None:
        swap()
        return
    if checks(marks):
        write(root, root_fd, [*marks, (0, "0" * 64)])
    swap()
    fd = os.open(HISTORY_NAME, fsutil.READ_FLAGS, dir_fd=root_fd)
    try:
        first = first_line(fd)
    finally:
        os.close(fd)
    write(root, root_fd, [mark_of(first)] if first else [])
