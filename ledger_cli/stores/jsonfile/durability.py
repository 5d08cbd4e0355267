"""How a large batch's files are made durable: one syncfs(2), or an fsync(2) each.

syncfs(2) makes every dirty page of the file system durable at once, far
cheaper per file than fsync(2), which writes the file and its inode and
flushes the disk's cache for each one (measured on ext4: about 0.01 ms a
record file against 0.5 ms). But syncfs also writes whatever other programs
left dirty on the same file system, and it runs under the store lock: with a
few hundred megabytes of someone else's writes pending, one call took many
seconds (docs/design.md §5.4 "Short lock holds": about 1 s at most). So a batch uses
syncfs only while the kernel reports little dirty memory (system wide: an
upper bound on what syncfs has to write), and an fsync per file otherwise,
whose time is the batch's own; of the two, the one expected to be cheaper
(an fsync costs about what syncfs takes to write FSYNC_BYTES). And a run of
large batches flushes what is dirty *before* each takes the lock
(`flush_before_lock`), so under the lock little is left to write.
"""

from __future__ import annotations

from ledger_cli.stores.jsonfile import fsutil

DIRTY_MAX = 32 << 20
"""Bytes of dirty and under-writeback memory above which a batch fsyncs each
file instead of calling syncfs(2) (a disk writes this in well under 1 s)."""

FSYNC_BYTES = 128 << 10
"""What one fsync(2) costs, as bytes a syncfs(2) writes in that time (~0.5 ms)."""

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


def use_syncfs(files: int) -> bool:
    """Whether a large batch writing `files` files should be made durable by one
    syncfs(2) now rather than an fsync(2) each."""
    if not fsutil.sync_filesystem_available():
        return False
    dirty = dirty_bytes()
    return dirty is not None and dirty <= max(DIRTY_MAX, files * FSYNC_BYTES)


def use_syncfs_small(fsyncs: int) -> bool:
    """Whether a small journalled commit, whose apply would otherwise cost
    `fsyncs` fsync(2) calls, should end with one syncfs(2) instead: only while
    what is dirty (mostly others' writes, which syncfs writes too) costs no
    more than those fsyncs would (FSYNC_BYTES each). A single write never
    pays for a busy neighbour's backlog."""
    if not fsutil.sync_filesystem_available():
        return False
    dirty = dirty_bytes()
    return dirty is not None and dirty <= fsyncs * FSYNC_BYTES


def flush_before_lock(root_fd: int, shown: str) -> None:
    """Outside the lock, before a large batch: write what is dirty if that is
    more than DIRTY_MAX (others' writes), so the batch's own syncfs(2) is short."""
    if not fsutil.sync_filesystem_available():
        return
    dirty = dirty_bytes()
    if dirty is not None and dirty > DIRTY_MAX:
        fsutil.sync_filesystem(root_fd, shown)
