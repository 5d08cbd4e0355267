"""deps/: the store's one reverse-needs index (records by the needs they name).

    deps/manifest         `ledger_cli.deps 1`: the index is built (complete)
    deps/ab/<digest of a need>
                          appended lines, the digests of the records whose
                          needs name that need, whatever their status

It serves the dependents walk (store.dependents: block on failure, retry's
un-block, cancel) and the ready index's promotion: when a need is written as
completed, the records its file lists that are live and whose direct needs
are all completed become candidates (apply.py, readyindex.py). Either way a
read costs the need's dependents, not the store. A need that has no record
yet (a record admitted before its need) has a file like any other.

It is a superset, never required to be exact: the dependents a write adds
(a record inserted with needs, or whose needs change) are appended, durably,
before the record is written; a need dropped by a rebase, a record pruned
(its needs become null) or a crash between the append and the record leave
a stale line, and a journal replay repeats lines. Readers keep only the
records whose needs really name the key, and rewrite (atomically, durably)
a file they found stale. A torn last line (a crash in an append) is a short
hex fragment: skipped, and the next append starts on a new line.

A missing manifest (a store written before this index, or a rebuild that a
crash cut short: the manifest is removed first and written last) means
"rebuild from the records": the next holder of the lock that needs the index
does. A need's file name is records.need_digest (the key digest of the need).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import derived, fsutil
from ledger_cli.stores.jsonfile.fsutil import damaged_index
from ledger_cli.stores.jsonfile.layout import DIGEST, SHARD, shown
from ledger_cli.stores.jsonfile.records import need_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["need_digest"]

DEPS_DIR = "deps"
MANIFEST = "manifest"
MANIFEST_DATA = b"ledger_cli.deps 1\n"
INDEX = derived.Index(DEPS_DIR, MANIFEST)


def open_dir(root: str, root_fd: int, *, create: bool, sync: bool = True) -> int | None:
    return fsutil.open_subdir(root_fd, DEPS_DIR, shown(root, DEPS_DIR), create=create, sync=sync)


def is_built(root: str, dfd: int) -> bool:
    """Whether the index is complete (its manifest is there); StoreError if damaged."""
    path = shown(root, DEPS_DIR, MANIFEST)
    data = fsutil.read_file(dfd, MANIFEST, path)
    if data is None:
        return False
    if data != MANIFEST_DATA:
        raise damaged_index(
            DEPS_DIR, path, "corrupt dependents index manifest (ledger doctor --fix rebuilds it)"
        )
    return True


def open_built(root: str, root_fd: int, rebuild: Callable[[], None]) -> int:
    """deps/ opened, built first by `rebuild` (from the records on disk, under the
    lock) when it is not: a reader relies on it being complete."""
    dfd = open_dir(root, root_fd, create=False)
    if dfd is not None:
        try:
            built = is_built(root, dfd)
        except BaseException:
            os.close(dfd)
            raise
        if built:
            return dfd
        os.close(dfd)
    rebuild()
    dfd = open_dir(root, root_fd, create=False)
    assert dfd is not None
    return dfd


def create_empty(root: str, root_fd: int) -> None:
    """The index of a new store (no records yet): built, empty; durable."""
    dfd = open_dir(root, root_fd, create=True)
    assert dfd is not None
    try:
        derived.mark_built(root, root_fd, dfd, INDEX, MANIFEST_DATA)
    finally:
        os.close(dfd)


def _shard_dir(root: str, dfd: int, shard: str, *, create: bool, sync: bool) -> int | None:
    return fsutil.open_subdir(dfd, shard, shown(root, DEPS_DIR, shard), create=create, sync=sync)


def append(root: str, dfd: int, adds: dict[str, set[str]], *, sync: bool) -> None:
    """Append `adds[need digest]` (dependent digests) to the needs' files: one
    append per file. With `sync` each file is fsynced, and the directories that
    got a new name; else the caller's syncfs(2) makes them durable."""
    by_shard: dict[str, list[str]] = {}
    for need in adds:
        by_shard.setdefault(need[:2], []).append(need)
    for shard, needs in sorted(by_shard.items()):
        sfd = _shard_dir(root, dfd, shard, create=True, sync=sync)
        assert sfd is not None
        try:
            created = False
            for need in sorted(needs):
                path = shown(root, DEPS_DIR, shard, need)
                fd = fsutil.open_regular(sfd, need, fsutil.APPEND_FLAGS, path)
                assert fd is not None  # O_CREAT
                # new (or empty): its name must be made durable
                created |= os.fstat(fd).st_size == 0
                fsutil.append_lines(fd, sorted(adds[need]), path, sync=sync)
            if created and sync:
                fsutil.fsync_fd(sfd, shown(root, DEPS_DIR, shard))
        finally:
            os.close(sfd)


def listed(root: str, dfd: int, need: str) -> tuple[set[str], bool]:
    """The dependent digests the file of `need` (a digest) lists, and whether the
    file holds more than those (repeats, a torn fragment): worth rewriting."""
    sfd = _shard_dir(root, dfd, need[:2], create=False, sync=False)
    path = shown(root, DEPS_DIR, need[:2], need)
    data = fsutil.read_in(sfd, need, path)
    if data is None:
        return set(), False
    # NUL bytes: the unwritten tail of an append a crash cut (never fsynced).
    got = derived.parse_digests(data.replace(b"\0", b"\n"), DIGEST.matches)
    if got is None:
        raise damaged_index(
            DEPS_DIR,
            path,
            # The entry itself is not shown: damaged bytes never reach the terminal.
            "corrupt dependents index entry (ledger doctor --fix rebuilds the index)",
        )
    return got


def rewrite(root: str, root_fd: int, dfd: int, need: str, digests: set[str]) -> None:
    """Replace the file of `need` by `digests` (a superset of its dependents on
    disk), durably: a crash leaves the old file or the new one."""
    sfd = _shard_dir(root, dfd, need[:2], create=False, sync=False)
    if sfd is None:
        return
    path = shown(root, DEPS_DIR, need[:2], need)
    try:
        # None listed alive: the file goes, nothing lost.
        derived.put_digests(sfd, need, digests, path, root_fd, sync=True)
        fsutil.fsync_fd(sfd, shown(root, DEPS_DIR, need[:2]))
    finally:
        os.close(sfd)


def edges(records: Iterable[tuple[str, TaskState]]) -> dict[str, set[str]]:
    """{need digest: digests of the records naming it} of (digest, record) pairs."""
    out: dict[str, set[str]] = {}
    for digest, rec in records:
        for need in rec.needs or ():
            out.setdefault(need_digest(need), set()).add(digest)
    return out


def rebuild(root: str, root_fd: int, records: Iterable[tuple[str, TaskState]]) -> None:
    """Write the whole index afresh from `records` (every record file's (digest,
    record)), durably. The manifest goes first and comes back last: a crash in
    between leaves none, which means "rebuild" to the next holder of the lock."""
    dfd = open_dir(root, root_fd, create=True)
    assert dfd is not None
    try:
        derived.unbuild(root, dfd, INDEX)
        _clear(root, dfd)
        syncfs = fsutil.sync_filesystem_available()
        append(root, dfd, edges(records), sync=not syncfs)
        if syncfs:
            fsutil.sync_filesystem(dfd, shown(root, DEPS_DIR))
        fsutil.fsync_fd(dfd, shown(root, DEPS_DIR))
        derived.mark_built(root, root_fd, dfd, INDEX, MANIFEST_DATA)
    finally:
        os.close(dfd)


def _clear(root: str, dfd: int) -> None:
    """Remove every need file (the manifest is gone already)."""
    for shard in os.listdir(dfd):
        if not SHARD.matches(shard):
            continue
        sfd = _shard_dir(root, dfd, shard, create=False, sync=False)
        if sfd is None:
            continue
        try:
            for name in os.listdir(sfd):
                fsutil.unlink_quiet(sfd, name)
        finally:
            os.close(sfd)
