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
from collections.abc import Callable
from typing import Literal

from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import fsutil, layout
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import io_scope, shown

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
    """Whether small commits go through the log: where the kernel names its boot
    (Linux). A checkpoint uses syncfs(2), or sync(2) where the C library lacks
    it; probing for it (ctypes) is left to the checkpoint, off the commit's path."""
    return boot_id() is not None


def _size(root: str, root_fd: int) -> int:
    try:
        return os.stat(WAL_NAME, dir_fd=root_fd, follow_symlinks=False).st_size
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise fail(shown(root, WAL_NAME), "cannot stat", exc) from None


class Mark:  # Mark and Replay: plain classes, as creating a NamedTuple is slow
    """wal.applied: how far a boot applied the log, and the last frame applied
    (where it starts, its CRC-32; start -1 in a mark older than that field)."""

    __slots__ = ("boot", "crc", "offset", "start")

    def __init__(self, boot: str, offset: int, start: int, crc: int) -> None:
        self.boot, self.offset, self.start, self.crc = boot, offset, start, crc


def read_mark(root: str, root_fd: int) -> Mark | None:
    """The mark in wal.applied; None when missing or unreadable."""
    data = fsutil.read_file(root_fd, APPLIED_NAME, shown(root, APPLIED_NAME))
    if data is None:
        return None
    parts = data.split()
    if len(parts) not in (2, 4) or not all(p.isdigit() for p in parts[1:]):
        return None
    numbers = [int(p) for p in parts[1:]] + [-1, 0]
    return Mark(parts[0].decode("ascii", "replace"), numbers[0], numbers[1], numbers[2])


def _mark_holds(root: str, root_fd: int, mark: Mark, size: int) -> bool:
    """Whether the log still holds what its mark says was applied from it: at
    least `offset` bytes, the last of them the frame the mark names. Frames up
    to a mark were fdatasynced before it was written, and a checkpoint sets
    the mark to 0 durably before it empties the log, so a log shorter than
    its mark, or another frame there, was damaged (emptied, cut, overwritten)."""
    if mark.offset == 0:
        return True
    if size < mark.offset:
        return False
    if mark.start < 0 or mark.start >= mark.offset:
        return mark.start < 0  # an older mark: only the length can be checked
    path = shown(root, WAL_NAME)
    fd = _open(root_fd, WAL_NAME, os.O_RDONLY | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC, path)
    with io_scope(fd, path, "cannot read"):
        data = os.pread(fd, mark.offset - mark.start, mark.start)
    if len(data) < FRAME.size:
        return False
    magic, length, crc = FRAME.unpack(data[: FRAME.size])
    body = data[FRAME.size :]
    whole: bool = magic == MAGIC and length == len(body) and crc == mark.crc
    return whole and zlib.crc32(body) == crc


class LogDamageError(StoreDamageError):
    """wal.log no longer holds the writes applied from it, or holds a damaged
    frame (doctor --fix sets it aside: JsonFileStore's `repair_log`). `lost`:
    writes may be on no disk but the log's (after a restart, or a frame never
    applied): only --drop-damaged accepts that."""

    def __init__(self, root: str, lost: bool, what: str) -> None:
        if lost:
            remedy = (
                "restore it from a backup, or accept the loss: ledger doctor --fix --drop-damaged"
            )
        else:
            remedy = "its writes were applied: ledger doctor --fix makes them durable"
        super().__init__(f"{shown(root, WAL_NAME)}: {what} ({remedy})")
        self.root = root
        self.lost = lost


def pending(root: str, root_fd: int) -> tuple[int, bool] | None:
    """Whether a holder of the lock has work on the log (None: none): where the
    frames not yet applied begin, and whether the machine restarted since they
    were written (then every frame is applied again). A log that disagrees
    with its mark answers too: a look without the lock can race a checkpoint,
    so recover() decides under the lock."""
    size = _size(root, root_fd)
    mark = read_mark(root, root_fd)
    if mark is None:
        return (0, True) if size else None
    if mark.boot != boot_id():
        return (0, True) if size or mark.offset else None
    if not _mark_holds(root, root_fd, mark, size):
        return 0, False
    if mark.offset == size:
        return None
    return mark.offset, False


def _open(root_fd: int, name: str, flags: int, path: str) -> int:
    try:
        return os.open(name, flags, fsutil.FILE_MODE, dir_fd=root_fd)
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None


def mark_applied(root: str, root_fd: int, offset: int, last: tuple[int, int] = (0, 0)) -> None:
    """Note that the log is applied up to `offset` in this boot, its last frame
    `last` (start, CRC-32). Not synced: only this boot's page cache needs to
    know; a new boot applies it all."""
    data = f"{boot_id()} {offset:020d} {last[0]:020d} {last[1]:010d}\n".encode("ascii")
    path = shown(root, APPLIED_NAME)
    fd = _open(root_fd, APPLIED_NAME, _RDWR, path)
    with io_scope(fd, path, "cannot write"):
        os.pwrite(fd, data, 0)  # the same length every time: written in place


def append(root: str, root_fd: int, payload: bytes) -> tuple[int, tuple[int, int]]:
    """Append one frame and fdatasync it: the commit point. The log's size
    after it, and the frame (start, CRC-32) for mark_applied."""
    path = shown(root, WAL_NAME)
    created = False
    try:
        try:
            fd = os.open(WAL_NAME, _APPEND & ~os.O_CREAT, dir_fd=root_fd)
        except FileNotFoundError:
            fd = os.open(WAL_NAME, _APPEND, fsutil.FILE_MODE, dir_fd=root_fd)
            created = True
    except OSError as exc:
        raise fsutil.open_failed(path, exc) from None
    start = -1
    crc = zlib.crc32(payload)
    frame = FRAME.pack(MAGIC, len(payload), crc) + payload
    try:
        start = os.fstat(fd).st_size
        fsutil.write_all(fd, frame)
        os.fdatasync(fd)
        end = start + len(frame)  # the lock holder is the log's only writer
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
    return end, (start, crc)


def read_frames(
    root: str, root_fd: int, start: int, lenient: bool = False
) -> tuple[list[bytes], int, tuple[int, int] | None]:
    """The payloads of the frames from `start`, where the last whole one ends,
    and that frame (start, CRC-32; None: no frame). A frame cut short at the
    end (a crash while it was written: never acknowledged) is left out; a
    damaged frame before another is refused, or with `lenient` ends the read."""
    path = shown(root, WAL_NAME)
    data = fsutil.read_file(root_fd, WAL_NAME, path) or b""
    frames: list[bytes] = []
    at = start
    last: tuple[int, int] | None = None
    while at < len(data):
        head = data[at : at + FRAME.size]
        if len(head) < FRAME.size:
            break  # a torn head at the end
        magic, length, crc = FRAME.unpack(head)
        body = data[at + FRAME.size : at + FRAME.size + length]
        whole = magic == MAGIC and len(body) == length and zlib.crc32(body) == crc
        if not whole:
            if lenient or (magic == MAGIC and at + FRAME.size + length >= len(data)):
                break  # the last frame, torn
            raise LogDamageError(root, True, f"damaged frame at byte {at}")
        frames.append(body)
        last = (at, crc)
        at += FRAME.size + length
    return frames, at, last


def cut(root: str, root_fd: int, end: int) -> None:
    """Drop a torn last frame (never acknowledged), so appends follow whole frames."""
    path = shown(root, WAL_NAME)
    fd = _open(root_fd, WAL_NAME, _RDWR, path)
    with io_scope(fd, path, "cannot cut the torn frame"):
        os.ftruncate(fd, end)
        os.fdatasync(fd)


def flush_if_due(root: str, root_fd: int) -> None:
    """Before taking the lock: when the log is near its checkpoint, write what
    is dirty if that is much (durability.flush_before_lock), so the
    checkpoint's syncfs(2), made under the lock, has little left to write."""
    if _size(root, root_fd) > CHECKPOINT_BYTES * 3 // 4:
        from ledger_cli.stores.jsonfile import durability

        durability.flush_before_lock(root_fd, root)


def checkpoint(root: str, root_fd: int) -> bool:
    """Make everything applied durable (one syncfs(2)) and empty the log; False
    when it was empty. The mark goes to 0 before the syncfs, which makes it
    durable with the rest, and the log is cut after: a crash in between
    applies the (durable) frames again, harmless and never skipped, and a log
    shorter than its mark is always damage (_mark_holds)."""
    if _size(root, root_fd) == 0:
        return False
    mark_applied(root, root_fd, 0)
    _sync_all(root, root_fd)
    cut(root, root_fd, 0)
    return True


def _sync_all(root: str, root_fd: int) -> None:
    if fsutil.sync_filesystem_available():
        fsutil.sync_filesystem(root_fd, root)
    else:  # no syncfs(2) in this C library: sync every file system
        os.sync()


Repair = Literal["no", "applied", "lossy"]


class Replay:
    """How the store applies frames (recover, set_aside): `replay` one, as a journal
    replay does, unsynced; after a restart, `rewrite_records` of every frame first
    (so no record the rebuilds read is torn), and `drop_indexes` (rebuilt after).
    Their flag (set_aside's frames before a damage): keep newer record files."""

    __slots__ = ("drop_indexes", "replay", "rewrite_records")

    def __init__(
        self,
        replay: Callable[[bytes, bool], None],
        rewrite_records: Callable[[list[bytes], bool], None],
        drop_indexes: Callable[[], None],
    ) -> None:
        self.replay, self.rewrite_records, self.drop_indexes = replay, rewrite_records, drop_indexes


def recover(
    root: str, root_fd: int, how: Replay, repair: Repair, mark_damaged: Callable[[], bool]
) -> tuple[str, bool] | None:
    """Apply the frames a crash left unapplied (under the store lock). After a
    restart of the machine every frame's records are written first, the
    indexes dropped, every frame applied in order, and the log checkpointed.

    A log that no longer holds what its mark says was applied is damaged:
    refused (exit 9), or set aside by `repair` (doctor --fix): "applied" when
    every write it held was applied in this boot, "lossy" (--drop-damaged)
    even after a restart. A damaged wal.applied (`mark_damaged`: walcheck.py)
    is no damage of the log: every frame is applied again, as after a
    restart. What was done to a damaged log and whether writes were lost, or None."""
    size = _size(root, root_fd)
    mark = read_mark(root, root_fd)
    restarted = mark is None or mark.boot != boot_id()
    if mark is not None and not (
        _mark_holds(root, root_fd, mark, size) or (restarted and mark.start < 0)
    ):
        if mark_damaged():  # wal.applied, not the log: as a restart
            mark, restarted = None, True
        elif repair == "no" or (repair == "applied" and restarted):
            raise LogDamageError(root, restarted, "damaged, writes applied from it are gone")
        else:
            return set_aside(
                root, root_fd, how, restarted, 0 if restarted else min(mark.offset, size)
            )
    start = 0 if restarted or mark is None else mark.offset
    if start >= size:
        return None
    try:
        frames, end, last = read_frames(root, root_fd, start)
    except LogDamageError:
        if repair != "lossy":
            raise
        return set_aside(root, root_fd, how, restarted, start, lost=True)
    if end != size:
        cut(root, root_fd, end)
    _apply(how, frames, restarted)
    if restarted:
        checkpoint(root, root_fd)
    elif mark is not None:
        mark_applied(root, root_fd, end, last or (mark.start, mark.crc))
    return None


def _apply(how: Replay, frames: list[bytes], restarted: bool, cut_short: bool = False) -> None:
    if restarted:
        how.rewrite_records(frames, cut_short)
        how.drop_indexes()
    for payload in frames:
        how.replay(payload, cut_short)
    if cut_short and frames:
        how.drop_indexes()  # the records kept may not be the frames' counts


def set_aside(
    root: str, root_fd: int, how: Replay, restarted: bool, start: int, lost: bool = False
) -> tuple[str, bool]:
    """A damaged log (doctor --fix): its whole frames from `start` applied (all
    of them after a restart, start 0), everything applied made durable, and
    the log moved into damaged/ with its bytes kept. Writes in frames past
    the damage are lost: after a restart the operator accepts that with
    --drop-damaged; in this boot they were applied before the damage was met.
    Their record files and history lines on disk are never rolled back."""
    frames, end, _ = read_frames(root, root_fd, start, lenient=True)
    _apply(how, frames, restarted, cut_short=True)
    _sync_all(root, root_fd)
    lost = lost or restarted
    kept = ", except those already in the record files (kept)"
    what = f"the writes past byte {end} are lost{kept}" if lost else "its writes are durable"
    gone = not layout.exists(root, root_fd, WAL_NAME)
    aside = None if gone else layout.move_aside(root, root_fd, WAL_NAME)
    # Only now, with no log left to replay: a crash before this leaves a mark
    # that the missing log does not hold (damage, which --fix ends), where an
    # earlier reset would let the next opener replay the cut log over newer records.
    mark_applied(root, root_fd, 0)
    if aside is None:
        return f"{shown(root, WAL_NAME)} was gone: {what}", lost
    return f"{shown(root, WAL_NAME)} was damaged: {what}; the log moved to {aside}", lost
