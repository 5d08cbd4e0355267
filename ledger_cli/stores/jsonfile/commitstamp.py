"""The commit stamp: what a reader without the lock compares before and after
its reads to know that no commit was applied meanwhile (`ledger stats`,
docs/design.md §6.5). Read without the lock, from files every commit changes
(written by wal.py, journal.py and pruning.py; this module only reads them).

The stamp is None while a commit is being applied, or cannot be judged:

- `journal.json` exists: a large batch (or any batch where wal.log is not
  used) is applied from the moment its journal is in place until it is
  removed (journal.py).
- wal.log is longer than `wal.applied` says was applied: a small commit
  appended its frame (its commit point) and is being applied; its mark is
  written once every file of the commit is (wal.py `mark_applied`). A
  checkpoint sets the mark to 0 before it empties the log, so it is None
  there too.
- `wal.applied` names another boot (a crash's frames wait for the next lock
  holder), or the kernel names no boot (not Linux: every commit goes through
  the journal, and a one-record write without one leaves no trace).
- `pruned/count` is missing: inside a prune's block (pruning.py).

Otherwise it is the bytes of: wal.log's size and inode, `wal.applied`'s
mark (boot, offset, and the last frame's start and CRC-32), history.jsonl's
size, `pruned/count`'s bytes, and the store directory's mtime. Each commit
changes it:

- a small commit adds a frame: the log grows, and the mark names the new
  frame (its start and CRC-32);
- a checkpoint empties the log (size 0, mark 0): what it was before comes
  back only after writes whose history lines grew history.jsonl (every
  write of the engine records its history, in the same commit), which only
  a prune shortens;
- a large batch's history lines grow history.jsonl too, and its journal,
  made and removed in the store directory, changes that directory's mtime
  (a commit without a history line, `restore`'s, still does);
- a prune's block rewrites `pruned/count` with a larger count (and a prune
  rewriting history.jsonl does so inside its blocks);
- `ledger limit`, `pause`, `resume` and a lease revoked replace their
  file of the store directory by a rename: its mtime changes.

Figures read between two equal stamps (not None) were read while nothing
was committed: they describe one instant.
"""

from __future__ import annotations

import os

from ledger_cli.stores.jsonfile import wal
from ledger_cli.stores.jsonfile.layout import HISTORY_NAME, JOURNAL_NAME


def _stat(root_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def stamp(root: str, root_fd: int, pruned: bytes | None) -> bytes | None:
    """The stamp of the store at `root_fd` (see the module's note), given
    `pruned/count`'s bytes as they read before this call (None: missing)."""
    boot = wal.boot_id()
    if pruned is None or boot is None or _stat(root_fd, JOURNAL_NAME) is not None:
        return None
    log = _stat(root_fd, wal.WAL_NAME)
    size = 0 if log is None else log.st_size
    mark = wal.read_mark(root, root_fd)
    applied = 0 if mark is None else mark.offset
    if applied != size or (mark is not None and mark.boot != boot):
        return None
    history = _stat(root_fd, HISTORY_NAME)
    where = os.fstat(root_fd)
    parts = (
        size,
        0 if log is None else log.st_ino,
        -1 if mark is None else mark.start,
        -1 if mark is None else mark.crc,
        0 if history is None else history.st_size,
        where.st_mtime_ns,
    )
    return " ".join(str(n) for n in parts).encode("ascii") + b" " + pruned
