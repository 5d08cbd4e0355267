"""How a large batch's files are made durable: one syncfs(2), or an fsync(2) each.

syncfs(2) makes every dirty page of the file system durable at once, far
cheaper per file than fsync(2), which writes the file and its inode and
flushes the disk's cache for each one (measured on ext4: about 0.01 ms a
record file against 0.5 ms). But syncfs also writes whatever other programs
left dirty on the same file system, and it runs under the store lock: with a
few hundred megabytes of someone else's writes pending, one call took many
seconds (SPEC §5 "Short lock holds": about 1 s at most). So a batch uses
syncfs only while the kernel reports little dirty memory (system wide: an
upper bound on what syncfs has to write), and an fsync per file otherwise,
whose time is the batch's own.
"""

from __future__ import annotations

from ledger_cli.stores import _fsutil

DIRTY_MAX = 32 << 20
"""Bytes of dirty and under-writeback memory above which a batch fsyncs each
file instead of calling syncfs(2) (a disk writes this in well under 1 s)."""

MEMINFO = "/proc/meminfo"
"""Where the kernel reports dirty memory (tests point it at a fake one)."""


def dirty_bytes() -> int | None:
    """Dirty plus under-writeback memory, system wide; None where unknown."""
    try:
        with open(MEMINFO, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    total = 0
    seen = 0
    for line in data.split(b"\n"):
        if line.startswith((b"Dirty:", b"Writeback:")):
            parts = line.split()
            try:
                total += int(parts[1]) * 1024
            except (IndexError, ValueError):
                return None
            seen += 1
    return total if seen == 2 else None


def use_syncfs() -> bool:
    """Whether a large batch should be made durable by one syncfs(2) now."""
    if not _fsutil.sync_filesystem_available():
        return False
    dirty = dirty_bytes()
    return dirty is not None and dirty <= DIRTY_MAX
