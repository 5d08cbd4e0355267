"""wal.log read whole, off the commit path (wal.py): `ledger doctor`'s check
of the frames this boot already applied, and telling a damaged wal.applied
from a damaged log.

- **Applied frames** are read by no command (they are in the record files,
  and the mark says how far): a byte damaged there would surface only after
  a restart of the machine, when every frame is applied again, and then
  every command would refuse the store. `doctor` reads them all
  (`check_applied`); `--fix` makes their writes durable (one syncfs(2))
  and moves the log into damaged/, its bytes kept (wal.set_aside): nothing
  is lost, for every write it held is in the files.
- **wal.applied** is derived (how far this boot applied the log): when the
  log is whole and the mark is a byte or two off the mark of one of its
  frames, the mark is what was damaged, and the log is applied again as
  after a restart (wal.recover), not refused as a damaged log.
"""

from __future__ import annotations

import os
import zlib

from ledger_cli.stores.jsonfile import fsutil, wal
from ledger_cli.stores.jsonfile.layout import shown
from ledger_cli.stores.jsonfile.wal import FRAME, MAGIC, LogDamageError

MARK_FLIPS = 2
"""Bytes by which a damaged wal.applied may differ from a mark the log holds."""


def frames(data: bytes, strict: bool = False) -> tuple[list[tuple[int, int, int]], int | None]:
    """The whole frames of a log's bytes (start, end, CRC-32 each) and where
    the first damaged one starts (None: none). A frame cut short at the end
    (never acknowledged) is no damage, unless `strict` (bytes all applied)."""
    whole: list[tuple[int, int, int]] = []
    at = 0
    while at < len(data):
        head = data[at : at + FRAME.size]
        if len(head) < FRAME.size:
            return whole, at if strict else None
        magic, length, crc = FRAME.unpack(head)
        end = at + FRAME.size + length
        body = data[at + FRAME.size : end]
        if magic == MAGIC and len(body) == length and zlib.crc32(body) == crc:
            whole.append((at, end, crc))
            at = end
            continue
        torn = magic == MAGIC and end >= len(data)
        return whole, None if torn and not strict else at
    return whole, None


def _log(root: str, root_fd: int) -> bytes:
    return fsutil.read_file(root_fd, wal.WAL_NAME, shown(root, wal.WAL_NAME)) or b""


def mark_damaged(root: str, root_fd: int) -> bool:
    """Whether wal.applied, which the log does not hold, is itself the damage:
    every frame of the log whole, and the mark at most MARK_FLIPS bytes off
    the mark that names one of them (a log cut or overwritten holds no such
    frame; a frame of another log there would have to share its place, its
    length and all but a digit of its CRC)."""
    text = fsutil.read_file(root_fd, wal.APPLIED_NAME, shown(root, wal.APPLIED_NAME))
    if not text:
        return False
    whole, bad = frames(_log(root, root_fd))
    if bad is not None:
        return False
    boot = text.split(b" ", 1)[0]
    for start, end, crc in whole:
        want = boot + f" {end:020d} {start:020d} {crc:010d}\n".encode("ascii")
        if len(want) != len(text):
            continue
        if sum(a != b for a, b in zip(want, text, strict=True)) <= MARK_FLIPS:
            return True
    return False


def _bad_frame(root: str, root_fd: int) -> int | None:
    """Where the first damaged frame this boot applied starts, or None."""
    mark = wal.read_mark(root, root_fd)
    if mark is None or mark.boot != wal.boot_id() or mark.offset == 0:
        return None  # nothing applied in this boot is in the log
    return frames(_log(root, root_fd)[: mark.offset], strict=True)[1]


def looks_damaged(root: str) -> bool:
    """`_bad_frame` without the store lock (`doctor` takes it only to confirm,
    docs/design.md §5.4: a checkpoint may empty the log meanwhile)."""
    root_fd = fsutil.open_root(root)
    if root_fd is None:
        return False
    try:
        return _bad_frame(root, root_fd) is not None
    finally:
        os.close(root_fd)


def check_applied(
    root: str, root_fd: int, how: wal.Replay, repair: wal.Repair
) -> tuple[str, bool] | None:
    """Under the store lock, once wal.recover ran: every frame this boot
    applied (the log up to its mark) read whole. A damaged one is refused
    (LogDamageError: its writes are in the files, durable only through the
    log until the next checkpoint), or with `repair` made durable and the log
    set aside (wal.set_aside). What was done, or None."""
    bad = _bad_frame(root, root_fd)
    if bad is None:
        return None
    if repair == "no":
        raise LogDamageError(root, False, f"damaged frame at byte {bad}")
    mark = wal.read_mark(root, root_fd)
    assert mark is not None
    return wal.set_aside(root, root_fd, how, False, mark.offset)
