"""live/: the index of pending and claimed records (`by_status` reads these only).

An empty marker `live/<digest>` per record a single write made live, and per
shard a file `live/ab.idx` listing the records a batch made live. The index is
a superset of the live records: entries are added durably before the record
is written, dropped after it, or by the scan that finds them stale.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ledger_cli.engine.record import TaskState
from ledger_cli.stores import _fsutil
from ledger_cli.stores._fsutil import fail
from ledger_cli.stores.jsonfile.layout import DIGEST, LIVE_DIR, LIVE_STATUSES, SHARD_INDEX, shown

_MARKER_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _fsutil.O_NOFOLLOW | _fsutil.O_CLOEXEC

ReadDigest = Callable[[str], "TaskState | None"]


def mark_live(root: str, lfd: int, digest: str) -> bool:
    """Create the live/ marker of `digest`; True if it was not there yet."""
    try:
        fd = os.open(digest, _MARKER_FLAGS, _fsutil.FILE_MODE, dir_fd=lfd)
    except FileExistsError:
        return False
    except OSError as exc:
        raise fail(shown(root, LIVE_DIR, digest), "cannot create", exc) from None
    try:
        os.fchmod(fd, _fsutil.FILE_MODE)
    finally:
        os.close(fd)
    return True


def read_shard_index(root: str, lfd: int, shard: str) -> set[str]:
    name = shard + ".idx"
    data = _fsutil.read_file(lfd, name, shown(root, LIVE_DIR, name))
    if data is None:
        return set()
    digests = set(data.decode("ascii", "replace").split())
    bad = next((d for d in digests if not DIGEST.fullmatch(d) or d[:2] != shard), None)
    if bad is not None:
        raise fail(shown(root, LIVE_DIR, name), f"corrupt index entry {bad[:70]!r}")
    return digests


def write_shard_index(root: str, root_fd: int, lfd: int, shard: str, digests: set[str]) -> None:
    """Replace a shard's index file (not fsynced: the caller syncs, or it is a removal)."""
    name = shard + ".idx"
    if not digests:
        _fsutil.unlink_quiet(lfd, name)
        return
    data = "".join(d + "\n" for d in sorted(digests)).encode("ascii")
    _fsutil.replace_file(
        lfd, name, data, shown(root, LIVE_DIR, name), sync=False, tmp_dir_fd=root_fd
    )


def index_batch(
    root: str, root_fd: int, lfd: int, records: dict[str, tuple[TaskState, bytes]]
) -> None:
    """Add a large batch's live records to the shard index files (made durable by
    the caller's syncfs, before the records are)."""
    by_shard: dict[str, tuple[set[str], set[str]]] = {}
    for digest, (rec, _) in records.items():
        adds, drops = by_shard.setdefault(digest[:2], (set(), set()))
        (adds if rec.status in LIVE_STATUSES else drops).add(digest)
    for shard, (adds, drops) in by_shard.items():
        if not adds:
            continue  # stale entries of dropped records: removed by the scan
        current = read_shard_index(root, lfd, shard)
        wanted = (current | adds) - drops
        if wanted != current:
            write_shard_index(root, root_fd, lfd, shard, wanted)


def scan_live(root: str, root_fd: int, read_digest: ReadDigest) -> dict[str, TaskState]:
    """The records the live/ index names that are live; stale entries (a record
    that went terminal, or never got written: a crash) are dropped. Under the lock."""
    found: dict[str, TaskState] = {}
    ldir = shown(root, LIVE_DIR)
    lfd = _fsutil.open_subdir(root_fd, LIVE_DIR, ldir, create=False)
    if lfd is None:
        return found
    try:
        markers: list[str] = []
        indexed: dict[str, set[str]] = {}
        for name in os.listdir(lfd):
            if DIGEST.fullmatch(name):
                markers.append(name)
            elif SHARD_INDEX.fullmatch(name):
                indexed[name[:2]] = read_shard_index(root, lfd, name[:2])
            elif name.endswith(_fsutil.TEMP_SUFFIX):
                _fsutil.unlink_quiet(lfd, name)
        verdict: dict[str, bool] = {}
        for digest in [*markers, *(d for ds in indexed.values() for d in ds)]:
            if digest not in verdict:
                rec = read_digest(digest)
                verdict[digest] = rec is not None and rec.status in LIVE_STATUSES
                if verdict[digest]:
                    assert rec is not None
                    found[digest] = rec
        for digest in markers:
            if not verdict[digest]:
                _fsutil.unlink_quiet(lfd, digest)
        for shard, digests in indexed.items():
            keep = {d for d in digests if verdict[d]}
            if keep != digests:
                write_shard_index(root, root_fd, lfd, shard, keep)
    except OSError as exc:
        raise fail(ldir, "cannot list", exc) from None
    finally:
        os.close(lfd)
    return found
