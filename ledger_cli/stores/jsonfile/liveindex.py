"""live/: the index of pending and claimed records (`by_status` reads these only).

An empty marker `live/<digest>` per record a single write made live, and per
shard a file `live/ab.idx` listing the records a batch made live. The index is
a superset of the live records: entries are added durably before the record
is written, and dropped after it, by the scan that finds them stale, or by
`ledger prune` with their records.

A batch appends its entries to the shard files (a line each), so its cost is
its own size, not the store's: the scan rewrites a file only to drop stale or
repeated entries. An append that a crash tore leaves a short hex fragment at
the end of a line; the next append starts on a new line, readers skip the
fragment, and the journal's replay appends the entries again.

A marker is also evidence: every write that makes a record live is
committed (journal or wal.log) before its marker is made, and a replay
writes the record, so a marker whose record file is missing (not pruned)
names a lost record. A write that finds its key free checks for it
(`refuse_lost`): one stat, on the path of a new key only. The scan
(`scan_live`, every read of pending or claimed records) keeps such an
entry and exits 9 naming it: a read that dropped it would free the key and
let a claim hand its fence out again. Only `doctor --fix --drop-damaged`
drops it (`drop_lost`), once it has accepted the losses and raised the
fence floor. `ledger prune` drops the entries of the records it removes
before their files go (`forget`); an entry whose key is in pruned/ (a store
pruned before it did, or a crash in between) is a finished record's stale
entry, dropped as such (`not_pruned`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.jsonfile import derived, fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.layout import (
    DIGEST,
    LIVE_DIR,
    LIVE_STATUSES,
    PRUNED_DIR,
    RECORDS_DIR,
    SHARD_INDEX,
    listing,
    shown,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    ReadDigest = Callable[[str], "TaskState | None"]

_MARKER_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | fsutil.O_NOFOLLOW | fsutil.O_CLOEXEC


def mark_live(root: str, lfd: int, digest: str) -> bool:
    """Create the live/ marker of `digest`; True if it was not there yet."""
    try:
        fd = os.open(digest, _MARKER_FLAGS, fsutil.FILE_MODE, dir_fd=lfd)
    except FileExistsError:
        return False
    except OSError as exc:
        raise fail(shown(root, LIVE_DIR, digest), "cannot create", exc) from None
    try:
        if fsutil.needs_fchmod():  # O_CREAT's mode went through the umask
            os.fchmod(fd, fsutil.FILE_MODE)
    finally:
        os.close(fd)
    return True


def refuse_lost(root: str, root_fd: int, digest: str) -> None:
    """StoreError naming the record file when `digest`'s record file is missing
    (the caller found none, nor a pruned record) while its live/ marker says
    it was pending or claimed: a lost record, whose key a write must not take
    again (another claim would hand out its fence again). Under the lock."""
    try:
        os.stat(f"{LIVE_DIR}/{digest}", dir_fd=root_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise fail(shown(root, LIVE_DIR, digest), "cannot read", exc) from None
    raise fail(
        shown(root, RECORDS_DIR, digest[:2], digest + ".json"),
        f"the record is lost: the file is missing while {LIVE_DIR}/{digest} lists it as "
        "pending or claimed; nothing written (restore it from a snapshot or backup with "
        "`ledger restore`, or accept the loss: ledger doctor --fix --drop-damaged)",
    )


class LiveIndexDamage(StoreDamageError):
    """live/ names fewer pending or claimed records than the tally counts (an
    entry is lost: a marker deleted, an index file cut; or a record file with
    it), or a shard file of it does not read: an answer from live/ would miss
    a record, which no reading goes around (`doctor --fix` repairs live/)."""


def read_shard_index(root: str, lfd: int, shard: str) -> tuple[set[str], bool]:
    """The digests a shard's index file lists, and whether the file holds more
    than those (repeated entries, a torn fragment): worth rewriting."""
    name = shard + ".idx"
    data = fsutil.read_file(lfd, name, shown(root, LIVE_DIR, name))
    if data is None:
        return set(), False
    got = derived.parse_digests(
        data,
        lambda d: DIGEST.matches(d) and d[:2] == shard,
        # A torn append leaves a digest's prefix, always on the last line of
        # its append (the next append begins with a newline): skipped.
        lambda d: derived.is_torn(d) and d[:2] in (shard, shard[:1], ""),
    )
    if got is None:
        # The entry itself is not shown: damaged bytes never reach the terminal.
        raise LiveIndexDamage(
            f"ledger: store: {shown(root, LIVE_DIR, name)}: "
            "corrupt index entry (ledger doctor --fix rebuilds the index)"
        )
    return got


def append_shard_index(
    root: str, lfd: int, shard: str, digests: Iterable[str], *, sync: bool
) -> None:
    """Append entries to a shard's index file (fsynced with `sync`; else the
    caller's syncfs makes them durable)."""
    name = shard + ".idx"
    path = shown(root, LIVE_DIR, name)
    fd = fsutil.open_regular(lfd, name, fsutil.APPEND_FLAGS, path)
    assert fd is not None  # O_CREAT
    fsutil.append_lines(fd, sorted(digests), path, sync=sync)


def write_shard_index(root: str, root_fd: int, lfd: int, shard: str, digests: set[str]) -> None:
    """Replace a shard's index file (not fsynced: the caller syncs, or it is a removal)."""
    name = shard + ".idx"
    derived.put_digests(lfd, name, digests, shown(root, LIVE_DIR, name), root_fd, sync=False)


def index_batch(
    root: str,
    lfd: int,
    records: dict[str, tuple[TaskState, bytes]],
    indexed: Callable[[str], bool],
    *,
    sync: bool,
) -> None:
    """Append a large batch's live records to the shard index files, durably
    (with `sync`: each file fsynced, then the directory; else by the caller's
    syncfs), before the records are written. `indexed(digest)`: the record is
    known to be listed already (live before this write): not appended again.
    Entries of records the batch finishes stay: the scan drops them."""
    by_shard: dict[str, list[str]] = {}
    for digest, (rec, _) in records.items():
        if rec.status in LIVE_STATUSES and not indexed(digest):
            by_shard.setdefault(digest[:2], []).append(digest)
    for shard, adds in by_shard.items():
        append_shard_index(root, lfd, shard, adds, sync=sync)
    if by_shard and sync:
        fsutil.fsync_fd(lfd, shown(root, LIVE_DIR))


class LostRecordError(StoreDamageError):
    """A live/ entry whose record file is missing and not pruned: a lost
    record, which no reading goes around (docs/design.md §5.5: a missing row
    is not a bad row)."""


def refuse_short(
    root: str, found: Iterable[TaskState], counted: Mapping[str, int], *, tallied: bool = True
) -> None:
    """LiveIndexDamage when the live records `found` through live/ are fewer, of
    either live status, than the tally's `counted` (exact under the lock), or
    than the records hold (`tallied` False: counted by a scan of them, while
    the tally is not built)."""
    seen = dict.fromkeys(LIVE_STATUSES, 0)
    for rec in found:
        seen[rec.status] += 1
    short = [s for s in sorted(LIVE_STATUSES) if seen[s] < counted[s]]
    if short:
        diff = ", ".join(f"{s} {counted[s]} (listed {seen[s]})" for s in short)
        counter = "the tally counts" if tallied else "the record files hold"
        raise LiveIndexDamage(
            f"ledger: store: {shown(root, LIVE_DIR)}: {counter} more live records "
            f"than the index lists: {diff}; an index entry or a record file is lost "
            "(ledger doctor names which, and --fix rebuilds the index)"
        )


def scan_live(
    root: str,
    root_fd: int,
    read_digest: ReadDigest,
    *,
    drop_lost: bool = False,
    counted: Mapping[str, int] | None = None,
    tallied: bool = True,
) -> dict[str, TaskState]:
    """The records the live/ index names that are live; stale entries (a record
    that went terminal, or was pruned since) are dropped. An entry whose record
    file is missing and not pruned names a lost record: StoreError (nothing
    dropped), unless `drop_lost` (`doctor --fix --drop-damaged`, once it has
    raised the fence floor), which drops it too. `counted`: the tally's counts
    (read under this lock hold), or with `tallied` False, while the tally is
    not built, the records' own, counted by a scan in this hold (None: no
    check): fewer live records found than they count is LiveIndexDamage
    (nothing dropped). Under the lock."""
    found: dict[str, TaskState] = {}
    with listing(root, root_fd, LIVE_DIR) as lfd:
        if lfd is None:
            return found
        markers: list[str] = []
        indexed: dict[str, set[str]] = {}
        tidy: set[str] = set()  # shard files holding repeats or a torn fragment
        for name in os.listdir(lfd):
            if DIGEST.matches(name):
                markers.append(name)
            elif SHARD_INDEX.matches(name):
                indexed[name[:2]], untidy = read_shard_index(root, lfd, name[:2])
                if untidy:
                    tidy.add(name[:2])
            elif name.endswith(fsutil.TEMP_SUFFIX):
                fsutil.unlink_quiet(lfd, name)
        verdict: dict[str, bool] = {}
        missing: list[str] = []
        for digest in [*markers, *(d for ds in indexed.values() for d in ds)]:
            if digest not in verdict:
                rec = read_digest(digest)
                verdict[digest] = rec is not None and rec.status in LIVE_STATUSES
                if rec is None:
                    missing.append(digest)
                elif verdict[digest]:
                    found[digest] = rec
        lost = not_pruned(root, root_fd, missing) if missing and not drop_lost else []
        if lost:  # checked before anything is dropped: nothing written
            path = shown(root, RECORDS_DIR, lost[0][:2], lost[0] + ".json")
            raise LostRecordError(
                f"ledger: store: {path}: the record is lost: the file is missing while "
                f"{LIVE_DIR}/{lost[0]} lists it as pending or claimed (ledger doctor names its key)"
            )
        if counted is not None and not drop_lost:
            refuse_short(root, found.values(), counted, tallied=tallied)
        for digest in markers:
            if not verdict[digest]:
                fsutil.unlink_quiet(lfd, digest)
        for shard, digests in indexed.items():
            keep = {d for d in digests if verdict[d]}
            if keep != digests or shard in tidy:
                write_shard_index(root, root_fd, lfd, shard, keep)
    return found


def not_pruned(root: str, root_fd: int, digests: Iterable[str]) -> list[str]:
    """The `digests` (of records whose file is missing) whose key is not in
    pruned/, sorted: lost records. A pruned one is a finished record's stale
    entry: prune drops a record's entries before its file, but a store made
    before it did, or a crash in between, can leave one."""
    from ledger_cli.stores.jsonfile import prunedfile
    from ledger_cli.stores.jsonfile.records import key_digest

    wanted = set(digests)
    pfd = fsutil.open_subdir(root_fd, PRUNED_DIR, shown(root, PRUNED_DIR), create=False)
    if pfd is None or not wanted:
        if pfd is not None:
            os.close(pfd)
        return sorted(wanted)
    pruned: set[str] = set()
    try:
        for shard in sorted({d[:2] for d in wanted}):
            name = shard + ".jsonl"
            path = shown(root, PRUNED_DIR, name)
            data = fsutil.read_file(pfd, name, path) or b""
            for line in data.split(b"\n")[:-1]:  # the last: b"" or a line a crash tore
                digest = key_digest(prunedfile.decode(line, path).key)
                if digest in wanted:
                    pruned.add(digest)
    finally:
        os.close(pfd)
    return sorted(wanted - pruned)


def forget(root: str, root_fd: int, digests: Iterable[str]) -> None:
    """Drop the live/ entries of `digests` (finished records `ledger prune` is
    about to remove), before their record files go. Not synced: a crash that
    keeps an entry leaves a pruned record's, which the scan drops. Under the lock."""
    drop = set(digests)
    with listing(root, root_fd, LIVE_DIR) as lfd:
        if lfd is None or not drop:
            return
        names = set(os.listdir(lfd))
        for digest in sorted(drop & names):
            fsutil.unlink_quiet(lfd, digest)
        for shard in sorted({d[:2] for d in drop}):
            if shard + ".idx" in names:
                listed, _ = read_shard_index(root, lfd, shard)
                if listed & drop:
                    write_shard_index(root, root_fd, lfd, shard, listed - drop)


def unbacked(root: str, root_fd: int) -> list[str]:
    """The digests live/ names (markers and shard files) whose record file is
    missing and whose key is not pruned (a pruned one is a finished record's
    stale entry): lost records. `doctor --fix --drop-damaged` raises the fence
    floor before its scan (`scan_live(drop_lost=True)`) frees their keys.
    Under the lock."""
    missing: list[str] = []
    for digest in sorted(listed(root, root_fd)):
        try:
            os.stat(
                f"{RECORDS_DIR}/{digest[:2]}/{digest}.json", dir_fd=root_fd, follow_symlinks=False
            )
        except (FileNotFoundError, NotADirectoryError):
            missing.append(digest)
        except OSError as exc:
            path = shown(root, RECORDS_DIR, digest[:2], digest + ".json")
            raise fail(path, "cannot read", exc) from None
    return not_pruned(root, root_fd, missing)


def listed(root: str, root_fd: int) -> set[str]:
    """Every digest live/ names, markers and shard files (StoreError for a
    shard file that does not read)."""
    named: set[str] = set()
    with listing(root, root_fd, LIVE_DIR) as lfd:
        if lfd is None:
            return named
        for name in os.listdir(lfd):
            if DIGEST.matches(name):
                named.add(name)
            elif SHARD_INDEX.matches(name):
                named |= read_shard_index(root, lfd, name[:2])[0]
    return named


def salvage(root: str, root_fd: int) -> list[str]:
    """Rewrite each shard file that does not read with the entries of its
    shard it still holds (`doctor --fix`: what else it listed, the records
    tell, `add_markers`); the paths rewritten. Under the lock."""
    done: list[str] = []
    with listing(root, root_fd, LIVE_DIR) as lfd:
        if lfd is None:
            return done
        for name in sorted(os.listdir(lfd)):
            if not SHARD_INDEX.matches(name):
                continue
            try:
                read_shard_index(root, lfd, name[:2])
            except LiveIndexDamage:
                data = fsutil.read_file(lfd, name, shown(root, LIVE_DIR, name)) or b""
                tokens = data.decode("ascii", "replace").split()
                kept = {d for d in tokens if DIGEST.matches(d) and d[:2] == name[:2]}
                path = shown(root, LIVE_DIR, name)
                derived.put_digests(lfd, name, kept, path, root_fd, sync=True)
                done.append(path)
        if done:
            fsutil.fsync_fd(lfd, shown(root, LIVE_DIR))
    return done


def add_markers(root: str, root_fd: int, digests: Iterable[str]) -> None:
    """Create the markers of `digests` (records live/ misses), durably. Under the lock."""
    lfd = fsutil.open_subdir(root_fd, LIVE_DIR, shown(root, LIVE_DIR), create=True)
    assert lfd is not None
    try:
        if any([mark_live(root, lfd, digest) for digest in digests]):
            fsutil.fsync_fd(lfd, shown(root, LIVE_DIR))
    finally:
        os.close(lfd)
