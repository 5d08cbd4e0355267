"""history.jsonl: the history of writes, one JSON object a line, appended under
the store lock, always through a journal (journal.py). A torn last line (a
crash in an append) is cut by the journal's replay, which the next holder of
the store lock runs before anything else; a file that still ends mid-line
under the lock is damage, which every writer refuses. A reader that meets a
torn last line (perhaps an append in progress) looks again under the lock
(`torn_tail`) and reports the damage (`log`, `doctor`: exit 9), and
`ledger doctor --fix --drop-damaged` accepts its loss (`keep_torn_tail`: the
torn bytes kept in damaged/, a `ledger.dropped` line).

history.started is written beside the history's first line (and beside an
older store's history at its next append), holding that line's length and
sum (historymark.py): from then on a missing, emptied or cut-short
history.jsonl is lost primary data, and writers refuse to start a new one
(exit 9 naming it) — a store written through the library, which keeps no
history, has neither file. `ledger doctor --fix --drop-damaged` accepts the
loss: it moves what is left into damaged/ and starts a new file with a
`ledger.dropped` line.

`ledger prune` drops the lines of the keys it pruned by rewriting the file,
mostly outside the lock: historyrewrite.py."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import fsutil, historymark
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import (
    DAMAGED_DIR,
    HISTORY_MARK,
    HISTORY_NAME,
    exists,
    free_name,
    io_scope,
    shown,
)
from ledger_cli.stores.jsonfile.locking import io_errors

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

_BLOCK = 1 << 20


def open_for_append(root: str, root_fd: int, at: int | None = None) -> tuple[int, int]:
    """Open history.jsonl for appending. (fd, size)"""
    fd, size, _ = _open(root, root_fd, at)
    return fd, size


def _open(
    root: str, root_fd: int, at: int | None
) -> tuple[int, int, list[historymark.Mark] | None]:
    """open_for_append, and history.started's marks (historymark.read).

    Every append goes through a journal (journal.py), whose `history_at` is the
    size before its lines: a line a crash tore is cut back by the journal's
    replay (`at`: the replay's cut, which `append_lines` makes). A file that
    ends mid-line otherwise is damage — history is primary data — and is
    refused, never cut (docs/design.md §3.2)."""
    path = shown(root, HISTORY_NAME)
    flags = os.O_RDWR | fsutil.O_NOFOLLOW | fsutil.O_NONBLOCK | fsutil.O_CLOEXEC
    try:
        try:
            fd = os.open(HISTORY_NAME, flags, dir_fd=root_fd)
        except FileNotFoundError:
            if at is None and exists(root, root_fd, HISTORY_MARK):
                raise lost_history(root) from None
            fd = os.open(HISTORY_NAME, flags | os.O_CREAT, fsutil.FILE_MODE, dir_fd=root_fd)
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    size = fsutil.require_regular(fd, path).st_size
    try:
        try:
            marks = historymark.read(root, root_fd)
        except historymark.MarkDamageError:
            if at is None:
                os.close(fd)
                raise
            marks = historymark.LEFT  # a replay: doctor names the mark
        if size == 0:
            os.fchmod(fd, fsutil.FILE_MODE)
        elif at is None and os.pread(fd, 1, size - 1) != b"\n":
            os.close(fd)
            raise damaged_history(path)
        if at is None and marks and not historymark.starts_as_marked(fd, size, marks):
            os.close(fd)
            raise cut_history(root)
    except OSError as exc:
        os.close(fd)
        raise fail(path, "cannot prepare for appending", exc) from None
    return fd, size, marks


def damage(root: str, root_fd: int) -> StoreDamageError | None:
    """What is wrong with a history history.started says the store kept:
    missing, or emptied or cut short (it does not start with the marked
    line); None when nothing is."""
    path = shown(root, HISTORY_NAME)
    fd = fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, path)
    if fd is None:
        return lost_history(root) if exists(root, root_fd, HISTORY_MARK) else None
    with io_scope(fd, path, "cannot read"):
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            return None  # torn: that report first (torn_tail), and its remedy
        marks = historymark.read(root, root_fd)
        if marks and not historymark.starts_as_marked(fd, size, marks):
            return cut_history(root)
    return None


def is_lost(root: str, root_fd: int) -> bool:
    """Whether history.jsonl is missing, emptied or cut short while
    history.started says the store kept one."""
    return damage(root, root_fd) is not None


def lost_history(root: str) -> StoreDamageError:
    return StoreDamageError(
        f"ledger: store: {shown(root, HISTORY_NAME)}: the history is missing, though the "
        f"store kept one ({HISTORY_MARK}); restore the file from a backup, or accept its "
        "loss: ledger doctor --fix --drop-damaged"
    )


def cut_history(root: str) -> StoreDamageError:
    return StoreDamageError(
        f"ledger: store: {shown(root, HISTORY_NAME)}: the history was emptied or cut short "
        f"(it does not start with the line {HISTORY_MARK} names); restore the file from a "
        "backup, or accept its loss: ledger doctor --fix --drop-damaged"
    )


def start_again(root: str, root_fd: int) -> None:
    """Create an empty history.jsonl in place of a lost one (`doctor --fix
    --drop-damaged`, under the store lock; its first line says why): what is
    left of an emptied or cut one moved into damaged/ first, its mark
    emptied (the first line's append writes it again)."""
    path = shown(root, HISTORY_NAME)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC
    try:
        if exists(root, root_fd, HISTORY_NAME):
            kept = shown(root, DAMAGED_DIR)
            dfd = fsutil.open_subdir(root_fd, DAMAGED_DIR, kept, create=True)
            assert dfd is not None
            try:
                target = free_name(dfd, HISTORY_NAME + ".cut")
                os.rename(HISTORY_NAME, target, src_dir_fd=root_fd, dst_dir_fd=dfd)
                fsutil.fsync_fd(dfd, kept)
            finally:
                os.close(dfd)
        historymark.write(root, root_fd, [])
        fd = os.open(HISTORY_NAME, flags, fsutil.FILE_MODE, dir_fd=root_fd)
        try:
            os.fchmod(fd, fsutil.FILE_MODE)
        finally:
            os.close(fd)
    except FileExistsError:
        return
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    fsutil.fsync_fd(root_fd, root)


def damaged_history(path: str) -> StoreDamageError:
    return StoreDamageError(
        f"ledger: store: {path}: damaged history (it ends mid-line, and no journal "
        "covers that line); refusing to write after it (restore the file from a backup, "
        "or accept the loss of that line: ledger doctor --fix --drop-damaged)"
    )


def complete_size(fd: int) -> int:
    """The size of the file open as `fd` up to the end of its last whole line
    (its size when it ends one; 0 when it holds no newline)."""
    end = os.fstat(fd).st_size
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return end
    end -= 1
    while end > 0:
        start = max(0, end - _BLOCK)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def _whole(fd: int) -> int | None:
    """`complete_size` when the file ends mid-line, else None."""
    whole = complete_size(fd)
    return None if whole == os.fstat(fd).st_size else whole


def torn_tail(root: str, root_fd: int) -> int | None:
    """When history.jsonl ends mid-line, its size up to its last whole line;
    None when it ends a line, is empty or is missing. Without the lock a
    torn line may be an append in progress; under it (after the replay that
    cuts a crash's torn line) it is the damage writers refuse."""
    path = shown(root, HISTORY_NAME)
    fd = fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, path)
    if fd is None:
        return None
    with io_scope(fd, path, "cannot read"):
        return _whole(fd)


def keep_torn_tail(root: str, root_fd: int) -> tuple[int, str] | None:
    """`doctor --fix --drop-damaged`, under the store lock (after a wal.log
    checkpoint, so no replay appends at an offset the cut moved): the torn
    last line of history.jsonl copied into damaged/ (fsynced), then the file
    cut back to its last whole line. (bytes cut, where they are kept); None
    when the file ends a line."""
    path = shown(root, HISTORY_NAME)
    kept = shown(root, DAMAGED_DIR)
    flags = os.O_RDWR | fsutil.O_NOFOLLOW | fsutil.O_NONBLOCK | fsutil.O_CLOEXEC
    fd = fsutil.open_regular(root_fd, HISTORY_NAME, flags, path)
    if fd is None:
        return None
    with io_scope(fd, path, "cannot keep its torn last line in damaged/ and cut it"):
        whole = _whole(fd)
        if whole is None:
            return None
        size = os.fstat(fd).st_size
        dfd = fsutil.open_subdir(root_fd, DAMAGED_DIR, kept, create=True)
        assert dfd is not None
        try:
            target = free_name(dfd, HISTORY_NAME + ".torn")
            kept = shown(root, DAMAGED_DIR, target)
            create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC
            out = os.open(target, create, fsutil.FILE_MODE, dir_fd=dfd)
            try:
                os.fchmod(out, fsutil.FILE_MODE)
                at = whole
                while chunk := os.pread(fd, min(_BLOCK, size - at), at):
                    fsutil.write_all(out, chunk)
                    at += len(chunk)
                os.fsync(out)
            finally:
                os.close(out)
            fsutil.fsync_fd(dfd, shown(root, DAMAGED_DIR))
        finally:
            os.close(dfd)
        os.ftruncate(fd, whole)
        os.fsync(fd)
        if whole == 0:  # its first line was the torn one: the next append marks it
            historymark.write(root, root_fd, [])
    return size - whole, kept


def append_lines(
    root: str, root_fd: int, lines: list[bytes], at: int | None, *, sync: bool
) -> None:
    """Append `lines`; `at`: the size the file must have before they go in (a
    journal replay cuts what a crashed apply appended); None = the end."""
    path = shown(root, HISTORY_NAME)
    fd, size, marks = _open(root, root_fd, at)
    new = size == 0  # perhaps just created: its name wants the root directory fsynced
    with io_scope(fd, path, "cannot append"):
        if at is not None:
            if size < at:
                raise fail(
                    path,
                    f"is shorter ({size} bytes) than the journal expects ({at}); "
                    "refusing to replay",
                )
            if size > at:
                os.ftruncate(fd, at)
            size = at
        os.lseek(fd, size, os.SEEK_SET)
        fsutil.write_all(fd, b"".join(lines))
        if sync:
            os.fsync(fd)
        if not historymark.checks(marks):  # once a store (and after a prune emptied it)
            historymark.write(root, root_fd, [historymark.mark_of(historymark.first_line(fd))])
    if new and sync:
        fsutil.fsync_fd(root_fd, root)


def holds(root: str, root_fd: int, lines: list[bytes], at: int) -> bool:
    """Whether history.jsonl holds `lines` at byte `at` already (a frame
    replayed over a history written past it: doctor --fix --drop-damaged)."""
    data = b"".join(lines)
    path = shown(root, HISTORY_NAME)
    try:
        fd = os.open(
            HISTORY_NAME, os.O_RDONLY | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC, dir_fd=root_fd
        )
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    with io_scope(fd, path, "cannot read"):
        return os.pread(fd, len(data), at) == data


def parse_history(data: bytes, shown: str) -> list[HistoryEntry]:
    lines = data.split(b"\n")
    lines.pop()  # b"" after a final newline; else a line torn by a crash: ignored
    return parse_lines(lines, shown, 0)


def parse_lines(lines: list[bytes], shown: str, before: int) -> list[HistoryEntry]:
    """Complete history lines (numbered from `before` + 1 in messages) as entries."""
    out: list[HistoryEntry] = []
    for number, line in enumerate(lines, before + 1):
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                raise TypeError
            out.append(HistoryEntry.from_obj(obj))
        except (KeyError, TypeError, UnicodeDecodeError, ValueError):
            raise fail(shown, f"line {number}: corrupt history entry") from None
    return out


def stream(
    root: str,
    key: str | None,
    pending: list[bytes],
    torn: Callable[[], None] | None = None,
) -> Iterator[HistoryEntry]:
    """History entries oldest first, streamed, then the `pending` lines of an
    open batch: `log` prints each as it is read. A torn last line is not an
    entry: `torn` is called when the file ends mid-line (the store looks
    again under its lock: an append in progress, or damage it refuses)."""
    path = shown(root, HISTORY_NAME)
    with io_errors(root):
        fd = None
        lost: StoreDamageError | None = None
        root_fd = fsutil.open_root(root)
        if root_fd is not None:
            try:
                lost = damage(root, root_fd)
                fd = fsutil.open_regular(root_fd, HISTORY_NAME, fsutil.READ_FLAGS, path)
            finally:
                os.close(root_fd)
            if lost is not None:
                raise lost
        number = 0
        if fd is not None:
            try:
                rest = b""
                while chunk := os.read(fd, 1 << 20):
                    lines = (rest + chunk).split(b"\n")
                    rest = lines.pop()  # an incomplete (maybe torn) line, for now
                    for entry in parse_lines(lines, path, number):
                        if key is None or entry.key == key:
                            yield entry
                    number += len(lines)
            finally:
                os.close(fd)
            if rest and torn is not None:
                torn()
        for entry in parse_lines(b"".join(pending).split(b"\n")[:-1], "(pending batch)", 0):
            if key is None or entry.key == key:
                yield entry
