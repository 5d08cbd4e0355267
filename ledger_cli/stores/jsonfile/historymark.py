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
- A mark whose bytes are not such lines (cut, flipped) is damage: it no
  longer says what the history starts with, so writers, `log` and the
  checks refuse it (`MarkDamageError`, exit 9) rather than write a new mark
  over it from whatever the history starts with now (an emptied history
  would pass). `doctor` names it; `--fix` writes it again when what is left
  of it agrees with the history's first line (`repaired`), and `--fix
  --drop-damaged` accepts the history as it is.
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

from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.layout import HISTORY_MARK, HISTORY_NAME, shown

if TYPE_CHECKING:
    from collections.abc import Callable

Mark = tuple[int, str]
"""(length of the first line, newline included; its SHA-256 hex)."""

_FIRST = 4096


class MarkDamageError(StoreDamageError):
    """history.started holds bytes that are no marks: what the history starts
    with is not known (`doctor` names it, `--fix` writes it again if safe)."""


_ZERO = b"0 " + b"0" * 64


def read_bytes(root_fd: int) -> bytes | None:
    """history.started's bytes (the first KiB); None when it is missing."""
    try:
        fd = os.open(HISTORY_MARK, fsutil.READ_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, 1024)
    finally:
        os.close(fd)


def parse(data: bytes) -> list[Mark] | None:
    """The marks in `data`, as `write` writes them; None when it holds anything else."""
    if data and not data.endswith(b"\n"):
        return None
    marks: list[Mark] = []
    for line in data.split(b"\n")[:-1]:
        length, _, digest = line.partition(b" ")
        if not (length.isdigit() and len(digest) == 64 and not digest.strip(b"0123456789abcdef")):
            return None
        marks.append((int(length), digest.decode("ascii")))
    return marks


def damaged_mark(root: str) -> MarkDamageError:
    return MarkDamageError(
        f"ledger: store: {shown(root, HISTORY_MARK)}: damaged mark of the history's first "
        "line: whether history.jsonl was emptied or cut is not known (ledger doctor names "
        "the remedy)"
    )


def read(root: str, root_fd: int) -> list[Mark] | None:
    """The marks history.started holds; None when it is missing; [] when it
    holds none this release can check (an older release's empty mark).
    MarkDamageError when it holds anything else."""
    data = read_bytes(root_fd)
    if data is None:
        return None
    marks = parse(data)
    if marks is None:
        raise damaged_mark(root)
    return marks


def repaired(data: bytes, first: bytes) -> list[Mark] | None:
    """The mark to write in place of the damaged `data`, when what is left of
    it agrees with the history's `first` line (each of its lines the start of
    that line's mark, or of a prune's mark of length 0: a mark cut short);
    None when it does not, or the history has no first line (emptied?)."""
    if not first:
        return None
    want = b"%d %s" % (len(first), sha256(first).hexdigest().encode("ascii"))
    for line in data.split(b"\n"):
        if not (want.startswith(line) or _ZERO.startswith(line)):
            return None
    return [mark_of(first)]


LEFT: list[Mark] = []
"""What a journal's replay takes for a damaged mark: it appends, and leaves
the mark as it is for `doctor` (a replay that refused would wedge the store)."""


def checks(marks: list[Mark] | None) -> bool:
    """Whether `marks` say what the history starts with (else: write them)."""
    if marks is LEFT:
        return True
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
    marks = read(root, root_fd)
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
