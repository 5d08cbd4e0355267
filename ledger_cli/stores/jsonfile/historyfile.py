"""history.jsonl: the history of writes, one JSON object a line, appended under
the store lock. A torn last line (a crash in an append) is ignored by readers
and cut by the next appender."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.stores import _fsutil
from ledger_cli.stores._fsutil import fail
from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, shown
from ledger_cli.stores.jsonfile.locking import io_errors


def open_for_append(root: str, root_fd: int) -> tuple[int, int]:
    """Open history.jsonl for appending; cut a torn last line (a crash's). (fd, size)."""
    path = shown(root, HISTORY_NAME)
    flags = os.O_RDWR | os.O_CREAT | _fsutil.O_NOFOLLOW | _fsutil.O_NONBLOCK | _fsutil.O_CLOEXEC
    try:
        fd = os.open(HISTORY_NAME, flags, _fsutil.FILE_MODE, dir_fd=root_fd)
    except OSError as exc:
        raise _fsutil.open_failed(path, exc) from None
    size = _fsutil.require_regular(fd, path).st_size
    try:
        if size == 0:
            os.fchmod(fd, _fsutil.FILE_MODE)
        elif os.pread(fd, 1, size - 1) != b"\n":
            keep = _last_newline(fd, size)
            os.ftruncate(fd, keep)
            os.fsync(fd)
            size = keep
    except OSError as exc:
        os.close(fd)
        raise fail(path, "cannot prepare for appending", exc) from None
    return fd, size


def append_lines(
    root: str, root_fd: int, lines: list[bytes], at: int | None, *, sync: bool
) -> None:
    """Append `lines`; `at`: the size the file must have before they go in (a
    journal replay cuts what a crashed apply appended); None = the end."""
    path = shown(root, HISTORY_NAME)
    fd, size = open_for_append(root, root_fd)
    new = size == 0  # perhaps just created: its name wants the root directory fsynced
    try:
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
        _fsutil.write_all(fd, b"".join(lines))
        if sync:
            os.fsync(fd)
    except OSError as exc:
        raise fail(path, "cannot append", exc) from None
    finally:
        os.close(fd)
    if new and sync:
        _fsutil.fsync_fd(root_fd, root)


def _last_newline(fd: int, size: int) -> int:
    """The offset just past the last b"\\n" before `size` (0 when there is none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


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


def drop_keys(root: str, root_fd: int, keys: set[str]) -> None:
    """Rewrite history.jsonl without the lines of `keys` (pruned), durably."""
    path = shown(root, HISTORY_NAME)
    data = _fsutil.read_file(root_fd, HISTORY_NAME, path)
    if not data:
        return
    kept = []
    for line in data.split(b"\n")[:-1]:  # a torn last line goes too
        try:
            key = json.loads(line.decode("utf-8"))["key"]
        except (KeyError, TypeError, UnicodeDecodeError, ValueError):
            raise fail(path, "corrupt history entry; refusing to rewrite it") from None
        if key not in keys:
            kept.append(line + b"\n")
    _fsutil.replace_file(root_fd, HISTORY_NAME, b"".join(kept), path, sync=True)
    _fsutil.fsync_fd(root_fd, root)


def stream(root: str, key: str | None, pending: list[bytes]) -> Iterator[HistoryEntry]:
    """History entries oldest first, streamed, then the `pending` lines of an
    open batch (a torn last line, left by a crash or an append in progress,
    is skipped): `log` prints each as it is read."""
    path = shown(root, HISTORY_NAME)
    with io_errors(root):
        fd = None
        root_fd = _fsutil.open_root(root)
        if root_fd is not None:
            try:
                flags = os.O_RDONLY | _fsutil.O_NOFOLLOW | _fsutil.O_NONBLOCK | _fsutil.O_CLOEXEC
                fd = os.open(HISTORY_NAME, flags, dir_fd=root_fd)
            except FileNotFoundError:
                fd = None
            except OSError as exc:
                raise _fsutil.open_failed(path, exc) from None
            finally:
                os.close(root_fd)
        number = 0
        if fd is not None:
            _fsutil.require_regular(fd, path)  # closes fd when it refuses
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
        for entry in parse_lines(b"".join(pending).split(b"\n")[:-1], "(pending batch)", 0):
            if key is None or entry.key == key:
                yield entry
