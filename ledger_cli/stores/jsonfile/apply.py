"""Applying writes: record files, their live/ entries and history lines, made durable.

A write outside `batch()` is durable before it returns: the new bytes go to a
temporary file that is fsynced and renamed over the record, then the
directory is fsynced. Large batches are made durable with one syncfs(2)
instead, while little else is dirty (durability.py; the journal covers a
crash before it), and list their live records in the shard index files
rather than a marker each.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import (
    depsindex,
    fsutil,
    historyfile,
    keyfiles,
    liveindex,
    readyindex,
    spares,
    tally,
)
from ledger_cli.stores.jsonfile.layout import LIVE_DIR, LIVE_STATUSES, RECORDS_DIR, shown
from ledger_cli.stores.jsonfile.readyindex import Entry
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Literal

    from ledger_cli.stores.jsonfile.keyfiles import SideOp

    Durability = Literal["now", "end", "log"]
    """How a write becomes durable: "now", synced file by file before it
    returns; "end", a journal covers it, one sync at the end (syncfs(2) where
    cheap); "log", wal.log covers it, nothing synced (wal.py)."""

SYNC_EACH_MAX = 16
"""Batches writing more files than this are large: indexed per shard, and made
durable with one syncfs(2) when durability.use_syncfs() allows."""


def write_records(
    root: str,
    root_fd: int,
    records: dict[str, tuple[TaskState, bytes]],
    history: list[bytes],
    history_at: int | None,
    read_digest: Callable[[str], TaskState | None],
    rebuild_ready: Callable[[], None],
    read_key: Callable[[str, str], TaskState | None] | None = None,
    indexed: Callable[[str], bool] = lambda digest: False,
    spare: Callable[[], int | None] = lambda: None,
    listed_needs: Callable[[str], frozenset[str] | None] = lambda digest: None,
    rebuild_deps: Callable[[], None] = lambda: None,
    completed_before: Callable[[str], bool] = lambda digest: False,
    counts: tally.Counts | None = None,
    journaled: Durability = "now",
    also: Callable[..., None] | None = None,
    also_fsyncs: int = 0,
    *,
    moved: set[str] | None = None,
    on_disk: Callable[[str], TaskState | None] = lambda digest: None,
    sides: Sequence[SideOp] = (),
) -> None:
    """Write records, their live/ markers, ready/ and deps/ entries and history
    lines; durable on return.

    Markers of records that become pending/claimed are created (and made
    durable) before the records are written, markers of the others removed
    after: the markers are always a superset of the live records. The same
    holds for the deps/ and ready/ indexes (depsindex.py, readyindex.py);
    deps/ goes first, as the ready/ promotion of a completed need reads it.
    `read_digest` reads a record as it is on disk; `rebuild_ready` rebuilds a
    missing ready/ index.
    `history_at`: the size history.jsonl must have before the lines go in
    (a journal replay cuts what a crashed apply appended); None = the end.
    `indexed(digest)`: that record was live on disk before this write (so the
    live/ index lists it already). `spare()`: an unnamed file to write a
    record into (spares.py), or None. `listed_needs(digest)`: the needs the
    deps/ index lists that record under already (its needs on disk), None when
    unknown (then all its needs are appended again: harmless repeats);
    `rebuild_deps` rebuilds a deps/ index that is not built (depsindex.py).
    `completed_before(digest)`: that record was completed on disk before this
    write, read under this lock hold (its dependents were promoted then), so
    writing it again promotes nothing; False when unknown (a journal replay).
    `counts`: the tally counts after this write (tally.py), None when it
    changes none. `journaled` "end": a journal on disk covers this write (a
    crash before it is durable replays it), so nothing need be durable before
    the end: one syncfs(2) makes it all durable, when durability.use_syncfs()
    allows, whatever the size; else an fsync a file (and directory). "log":
    wal.log covers it and a checkpoint makes it durable later: no sync here.
    `also(sync=…)`: more files of the commit (attempts), written before the
    end's sync; `also_fsyncs` the fsyncs it makes with `sync`. `moved`: the
    records whose tally membership changes (tally.apply), None: all of them.
    `on_disk(digest)`: that record as read from disk under this lock hold,
    None when it is not there or was not read. `sides`: the side files of
    the commit (a key's queue or schedule, keyfiles.py), written first, so
    the ready/ entries of the write go where they say; a key whose side file
    changes gets the entry its record has under it, when a candidate (the one
    under its old queue or schedule is stale, dropped when met).
    """
    files = len(records) + (1 if history else 0)
    bulk = files > SYNC_EACH_MAX
    logged = journaled == "log"
    if logged:
        use_syncfs = False
    elif bulk:
        from ledger_cli.stores.jsonfile import durability  # large commits only

        use_syncfs = durability.use_syncfs(files + len(sides))
    else:
        # The fsyncs a small journalled apply makes without syncfs: a record
        # file and its directory each, the history, the tally's two or three.
        saved = 2 * len(records) + (1 if history else 0) + (3 if counts is not None else 0)
        saved += also_fsyncs + (keyfiles.side_fsyncs(sides) if sides else 0)
        use_syncfs = False
        if journaled == "end":  # a journal's commit ("now": synced file by file)
            from ledger_cli.stores.jsonfile import durability

            use_syncfs = durability.use_syncfs_small(saved)
    rfd = lfd = None
    shard_fds: dict[str, int] = {}
    ready: _ReadyWork | None = None
    try:
        sync = not use_syncfs and not logged
        changed: frozenset[str] = frozenset()
        if sides:
            keyfiles.apply_sides(root, root_fd, sides, sync=sync)
            changed = frozenset(key for _, key, _ in sides)
        if records:
            index_needs(root, root_fd, records, listed_needs, rebuild_deps, sync=sync)
        if records or changed:
            ready = _ReadyWork(root, root_fd, records, read_digest, rebuild_ready, read_key)
            ready.before(rebuild_deps, completed_before, on_disk, changed, sync=sync)
        if records:
            rfd = fsutil.open_subdir(
                root_fd, RECORDS_DIR, shown(root, RECORDS_DIR), create=True, sync=sync
            )
            lfd = fsutil.open_subdir(
                root_fd, LIVE_DIR, shown(root, LIVE_DIR), create=True, sync=sync
            )
            assert rfd is not None and lfd is not None
            if bulk:
                # Many records: appended to one index file per shard rather
                # than a marker each (the journal covers a crash in between).
                liveindex.index_batch(root, lfd, records, indexed, sync=sync)
            else:
                created = False
                for digest, (rec, _) in records.items():
                    if rec.status in LIVE_STATUSES and not indexed(digest):
                        created |= liveindex.mark_live(root, lfd, digest)
                if created and sync:
                    fsutil.fsync_fd(lfd, shown(root, LIVE_DIR))
            for digest in records:
                shard = digest[:2]
                if shard not in shard_fds:
                    sfd = fsutil.open_subdir(
                        rfd, shard, shown(root, RECORDS_DIR, shard), create=True, sync=sync
                    )
                    assert sfd is not None
                    shard_fds[shard] = sfd
            for digest, (_, data) in records.items():
                fname = digest + ".json"
                path = shown(root, RECORDS_DIR, digest[:2], fname)
                sfd = shard_fds[digest[:2]]
                fd = spare() if bulk else None
                if fd is not None:
                    spares.replace_from(fd, sfd, fname, data, path, sync=sync, tmp_dir_fd=root_fd)
                else:
                    fsutil.replace_file(sfd, fname, data, path, sync=sync, tmp_dir_fd=root_fd)
        if counts is not None:
            tally.apply(root, root_fd, counts, records, sync=sync, moved=moved)
        if history:
            historyfile.append_lines(root, root_fd, history, history_at, sync=sync)
        if also is not None:
            also(sync=sync)
        if use_syncfs:
            fsutil.sync_filesystem(root_fd, root)
        elif sync:
            for shard, sfd in shard_fds.items():
                fsutil.fsync_fd(sfd, shown(root, RECORDS_DIR, shard))
        if lfd is not None:
            for digest, (rec, _) in records.items():
                if rec.status not in LIVE_STATUSES:
                    fsutil.unlink_quiet(lfd, digest)  # a leftover is harmless
        if ready is not None:
            ready.after()
    finally:
        fsutil.close_all([*shard_fds.values(), rfd, lfd, ready.rfd if ready else None])


def index_needs(
    root: str,
    root_fd: int,
    records: dict[str, tuple[TaskState, bytes]],
    listed_needs: Callable[[str], frozenset[str] | None],
    rebuild_deps: Callable[[], None],
    *,
    sync: bool,
) -> None:
    """Append to deps/ the needs the records name that it does not list them
    under yet (an insert with needs, a rebase), before the records are written:
    one append per need file. Writes that change no needs cost nothing here."""
    adds: dict[str, set[str]] = {}
    for digest, (rec, _) in records.items():
        if not rec.needs:
            continue
        before = listed_needs(digest)
        for need in rec.needs:
            if before is None or need not in before:
                adds.setdefault(depsindex.need_digest(need), set()).add(digest)
    if not adds:
        return
    dfd = depsindex.open_dir(root, root_fd, create=False)
    try:
        if dfd is None or not depsindex.is_built(root, dfd):
            fsutil.close_all([dfd])
            dfd = None
            rebuild_deps()  # from the records as they are on disk, before this write
            dfd = depsindex.open_dir(root, root_fd, create=False)
            assert dfd is not None
        depsindex.append(root, dfd, adds, sync=sync)
    finally:
        fsutil.close_all([dfd])


class _ReadyWork:
    """The ready/ index changes of one write: entries added (durably) before the
    records are written, stale ones dropped after."""

    def __init__(
        self,
        root: str,
        root_fd: int,
        records: dict[str, tuple[TaskState, bytes]],
        read_digest: Callable[[str], TaskState | None],
        rebuild_ready: Callable[[], None],
        read_key: Callable[[str, str], TaskState | None] | None,
    ) -> None:
        self.root, self.root_fd, self.records = root, root_fd, records
        self.read_digest = read_digest
        self.read_key = read_key
        from ledger_cli.stores.jsonfile.schedulefile import reader

        self.sched = reader(root)  # docs/design.md §8.2: the entries' order
        self.rfd = readyindex.open_dir(root, root_fd, create=False)
        # The manifest is read once a write (before and after share it).
        self._chunks = None if self.rfd is None else readyindex.load_chunks(root, root_fd, self.rfd)
        if self._chunks is None:
            rebuild_ready()  # from the records as they are on disk, before this write
            fsutil.close_all([self.rfd])
            self.rfd = readyindex.open_dir(root, root_fd, create=True)
            assert self.rfd is not None
            self._chunks = readyindex.load_chunks(root, root_fd, self.rfd)

    def load(self, key: str) -> TaskState | None:
        digest = key_digest(key)
        if digest is None:
            return None
        pending = self.records.get(digest)
        if pending is not None:
            return pending[0]
        if self.read_key is not None:  # a pruned need is read from pruned/
            return self.read_key(key, digest)
        return self.read_digest(digest)

    def before(
        self,
        rebuild_deps: Callable[[], None],
        completed_before: Callable[[str], bool],
        on_disk: Callable[[str], TaskState | None],
        changed: frozenset[str] = frozenset(),
        *,
        sync: bool,
    ) -> None:
        """Add the candidates this write makes: its live records whose needs are
        all met, the dependents (listed by deps/) of the needs it completes,
        and the records of the `changed` keys (a new queue or schedule, its
        file written already) under their new entry.
        A record that stays live with the same entry and needs (a claim, a
        renewal, a release) adds nothing: if it is a candidate now, it was one
        on disk, so the index holds its entry already (a chunk read spared)."""
        assert self.rfd is not None
        adds: set[readyindex.Entry] = set()
        completed: list[str] = []
        for digest, (rec, _) in self.records.items():
            if rec.status in LIVE_STATUSES:
                entry = readyindex.entry_of(rec, self.sched(rec.key))
                if entry is None:
                    continue
                if rec.key not in changed and self._indexed_before(on_disk(digest), rec, entry):
                    continue
                if readyindex.is_candidate(rec, self.load):
                    adds.add(entry)
            elif rec.status == "completed" and not completed_before(digest):
                completed.append(digest)
        for key in changed:
            if key_digest(key) in self.records:
                continue  # looked at above
            on = self.load(key)  # on disk: its record this write leaves alone
            if on is not None and readyindex.is_candidate(on, self.load):
                entry = readyindex.entry_of(on, self.sched(key))
                if entry is not None:
                    adds.add(entry)
        if completed:
            adds |= self._promoted(completed, rebuild_deps)
        if adds:
            assert self._chunks is not None
            self._chunks.add(adds, sync=sync)

    def _indexed_before(self, old: TaskState | None, rec: TaskState, entry: Entry) -> bool:
        """`old` (on disk) is live with `rec`'s entry and needs, none of them
        written by this batch: a candidate exactly when `rec` is one."""
        return (
            old is not None
            and old.status in LIVE_STATUSES
            and old.needs == rec.needs
            and readyindex.entry_of(old, self.sched(old.key)) == entry
            and not any(key_digest(need) in self.records for need in rec.needs or ())
        )

    def _promoted(self, completed: list[str], rebuild_deps: Callable[[], None]) -> set[Entry]:
        """The entries of the records on disk that the completion of `completed`
        (digests) makes candidates: live, naming one of them, every need completed.
        deps/ lists them (a superset of every record naming a need: built first
        if it is not); the batch's own records were looked at by `before`."""
        out: set[Entry] = set()
        dfd = depsindex.open_built(self.root, self.root_fd, rebuild_deps)
        try:
            for need in completed:
                key = self.records[need][0].key
                for digest in depsindex.listed(self.root, dfd, need)[0]:
                    if digest in self.records:
                        continue
                    dep = self.read_digest(digest)
                    if (
                        dep is not None
                        and key in (dep.needs or ())
                        and readyindex.is_candidate(dep, self.load, key)
                        and (entry := readyindex.entry_of(dep, self.sched(dep.key))) is not None
                    ):
                        out.add(entry)
        finally:
            os.close(dfd)
        return out

    def after(self) -> None:
        assert self.rfd is not None
        drops = [
            entry
            for rec, _ in self.records.values()
            if rec.status not in LIVE_STATUSES
            and (entry := readyindex.entry_of(rec, self.sched(rec.key))) is not None
        ]
        if drops and self._chunks is not None:
            self._chunks.remove(drops)
