"""wal.log: the commit point of every small write, made durable by one fdatasync(2).

A small commit (a claim, a completion, an admit, a renewal: at most
apply.SYNC_EACH_MAX records) appends one frame to wal.log — the bytes a
journal would hold (journal.py), behind a length and a CRC-32 — and
fdatasyncs it. That one call is the commit point and the write's only sync:
the record files, indexes, tally and history lines it describes are then
written through the page cache, unsynced. Two things make that safe:

- **A crash of the process** (SIGKILL, an I/O error) loses nothing the page
  cache holds. `wal.applied` notes how far the log has been applied (the
  current boot's id and an offset, written unsynced after each apply); the
  next holder of the store lock applies the frames after it again, as a
  journal replay does.
- **A crash of the machine** (a power cut, a kernel panic) starts a new boot,
  so `wal.applied` names another boot id (or none): the next holder writes
  every frame's records again, marks the derived indexes (ready/, deps/,
  tally/) unbuilt so they are rebuilt from those records, applies every
  frame in order, and checkpoints.

A checkpoint makes everything applied durable with one syncfs(2) and empties
the log. It runs when the log passes CHECKPOINT_BYTES (about a thousand
writes share it), and before any write of primary data that goes around the
log (a large batch's journal, prune and its history rewrite, attempt files
written outside a batch): a frame replayed after such a write could
otherwise undo it. Derived files (indexes, the tally) need none: a restart
rebuilds them.

The log is used where the kernel names its boot (Linux); elsewhere every
commit goes through journal.json and syncs as it always did.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import shown

if TYPE_CHECKING:
    from collections.abc import Callable

WAL_NAME = "wal.log"
APPLIED_NAME = "wal.applied"
FRAME = struct.Struct(">4sII")
"""A frame's head: magic, payload length, CRC-32 of the payload."""
MAGIC = b"LWF1"
CHECKPOINT_BYTES = 1 << 20
"""The log's size past which the commit that grew it checkpoints."""
BOOT_ID = "/proc/sys/kernel/random/boot_id"
"""Where the kernel names the current boot (tests point it at a fake one)."""

_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC
_RDWR = os.O_RDWR | os.O_CREAT | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC


_boot: dict[str, str | None] = {}


def boot_id() -> str | None:
    """This boot's id, None where the kernel does not say (then the log is not
    used). Read once a process (per BOOT_ID path: tests change it)."""
    if BOOT_ID not in _boot:
        try:
            with open(BOOT_ID, "rb") as fh:
                text = fh.read().decode("ascii", "replace").strip()
        except OSError:
            text = ""
        _boot[BOOT_ID] = text if 0 < len(text) <= 64 and " " not in text else None
    return _boot[BOOT_ID]


def enabled() -> bool:
    """Whether small commits go through the log: where the kernel names its
    boot (Linux). A checkpoint uses syncfs(2), or sync(2) where the C library
    lacks it; probing for it (ctypes) is left to the checkpoint, off the
    commit's path."""
    return boot_id() is not None


def _size(root: str, root_fd: int) -> int:
    try:
        return os.stat(WAL_NAME, dir_fd=root_fd, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise fail(shown(root, WAL_NAME), "cannot stat", exc) from None


def _applied(root: str, root_fd: int) -> tuple[str, int] | None:
    """(boot id, offset) from wal.applied; None when missing or unreadable."""
    data = fsutil.read_file(root_fd, APPLIED_NAME, shown(root, APPLIED_NAME))
    if data is None:
        return None
    parts = data.split()
    if len(parts) != 2 or not parts[1].isdigit():
        return None
    return parts[0].decode("ascii", "replace"), int(parts[1])


def pending(root: str, root_fd: int) -> tuple[int, bool] | None:
    """Where the frames not yet applied begin, and whether the machine restarted
    since they were written (then every frame is applied again); None when the
    log holds nothing to apply."""
    size = _size(root, root_fd)
    if size == 0:
        return None
    noted = _applied(root, root_fd)
    if noted is None or noted[0] != boot_id():
        return 0, True
    at = noted[1]
    if at == size:
        return None
    return (at if at < size else 0), False


def mark_applied(root: str, root_fd: int, offset: int) -> None:
    """Note that the log is applied up to `offset` in this boot (not synced:
    only this boot's page cache needs to know; a new boot applies it all)."""
    data = f"{boot_id()} {offset:020d}\n".encode("ascii")
    path = shown(root, APPLIED_NAME)
    try:
        fd = os.open(APPLIED_NAME, _RDWR, fsutil.FILE_MODE, dir_fd=root_fd)
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    try:
        os.pwrite(fd, data, 0)  # the same length every time: written in place
    except OSError as exc:
        raise fail(path, "cannot write", exc) from None
    finally:
        os.close(fd)


def append(root: str, root_fd: int, payload: bytes) -> int:
    """Append one frame and fdatasync it: the commit point. The log's size after it."""
    path = shown(root, WAL_NAME)
    created = not _exists(root_fd)
    try:
        fd = os.open(WAL_NAME, _APPEND, fsutil.FILE_MODE, dir_fd=root_fd)
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    start = -1
    try:
        start = os.fstat(fd).st_size
        fsutil.write_all(fd, FRAME.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload)
        os.fdatasync(fd)
        end = os.fstat(fd).st_size
    except OSError as exc:
        # Not acknowledged: take the frame back (a full disk, a failed sync), so
        # no later opener applies a write its caller was told had failed.
        if start >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
        raise fail(path, "cannot append", exc) from None
    finally:
        os.close(fd)
    if created:  # the log's name, once: later appends change only its data
        fsutil.fsync_fd(root_fd, root)
    return end


def _exists(root_fd: int) -> bool:
    try:
        os.stat(WAL_NAME, dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def read_frames(root: str, root_fd: int, start: int) -> tuple[list[bytes], int]:
    """The payloads of the frames from `start`, and where the last whole one
    ends. A frame cut short at the end (a crash while it was written: never
    acknowledged) is left out; a damaged frame before another is refused."""
    path = shown(root, WAL_NAME)
    data = fsutil.read_file(root_fd, WAL_NAME, path) or b""
    frames: list[bytes] = []
    at = start
    while at < len(data):
        head = data[at : at + FRAME.size]
        if len(head) < FRAME.size:
            break  # a torn head at the end
        magic, length, crc = FRAME.unpack(head)
        body = data[at + FRAME.size : at + FRAME.size + length]
        whole = magic == MAGIC and len(body) == length and zlib.crc32(body) == crc
        if not whole:
            if magic == MAGIC and at + FRAME.size + length >= len(data):
                break  # the last frame, torn
            raise fail(
                path,
                f"damaged frame at byte {at}; refusing to replay the log (the writes since "
                "the last checkpoint are in it: restore it from a backup, or move it aside "
                "to open the store without them)",
            )
        frames.append(body)
        at += FRAME.size + length
    return frames, at


def cut(root: str, root_fd: int, end: int) -> None:
    """Drop a torn last frame (never acknowledged), so appends follow whole frames."""
    path = shown(root, WAL_NAME)
    try:
        fd = os.open(WAL_NAME, _RDWR, fsutil.FILE_MODE, dir_fd=root_fd)
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    try:
        os.ftruncate(fd, end)
        os.fdatasync(fd)
    except OSError as exc:
        raise fail(path, "cannot cut the torn frame", exc) from None
    finally:
        os.close(fd)


def flush_if_due(root: str, root_fd: int) -> None:
    """Before taking the lock: when the log is near its checkpoint, write what
    is dirty if that is much (durability.flush_before_lock), so the
    checkpoint's syncfs(2), made under the lock, has little left to write."""
    if _size(root, root_fd) > CHECKPOINT_BYTES * 3 // 4:
        from ledger_cli.stores.jsonfile import durability

        durability.flush_before_lock(root_fd, root)


def checkpoint(root: str, root_fd: int) -> bool:
    """Make everything applied durable (one syncfs(2)) and empty the log; False
    when it was empty. wal.applied goes to 0 before the log is cut, so a crash
    in between applies the (durable) frames again: harmless, never skipped."""
    if _size(root, root_fd) == 0:
        return False
    if fsutil.sync_filesystem_available():
        fsutil.sync_filesystem(root_fd, root)
    else:  # no syncfs(2) in this C library: sync every file system
        os.sync()
    mark_applied(root, root_fd, 0)
    cut(root, root_fd, 0)
    return True


def recover(
    root: str,
    root_fd: int,
    replay: Callable[[bytes], None],
    rewrite_records: Callable[[list[bytes]], None],
    drop_indexes: Callable[[], None],
) -> None:
    """Apply the frames a crash left unapplied (under the store lock).

    `replay(payload)` applies one frame as a journal replay does, unsynced.
    After a restart of the machine, `rewrite_records(payloads)` first writes
    every frame's records (the newest bytes of each), so no record the
    rebuilds read is one the power cut tore, and `drop_indexes()` marks the
    derived indexes unbuilt; the frames are then applied in order and the
    log checkpointed."""
    todo = pending(root, root_fd)
    if todo is None:
        return
    start, restarted = todo
    frames, end = read_frames(root, root_fd, start)
    if end != _size(root, root_fd):
        cut(root, root_fd, end)
    if restarted:
        rewrite_records(frames)
        drop_indexes()
    for payload in frames:
        replay(payload)
    if restarted:
        checkpoint(root, root_fd)
    else:
        mark_applied(root, root_fd, end)
