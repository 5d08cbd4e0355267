"""The JSON store's side of `ledger prune` (docs/design.md §6.4; engine/prune.py, prunedfile.py)."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import apply, fsutil, liveindex, prunedfile, tally
from ledger_cli.stores.jsonfile.layout import PRUNED_COUNT, PRUNED_DIR, RECORDS_DIR
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.reading import RecordReader
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence


class PruneMethods(RecordReader):
    if TYPE_CHECKING:

        def _rebuild_tally(self, root_fd: int) -> tally.Counts: ...

    # -- prune (docs/design.md §6.4; engine/prune.py, prunedfile.py) ----------------------------

    @store_method
    def prune_records(
        self, pairs: Sequence[tuple[TaskState, TaskState]], *, defer_history: bool = False
    ) -> int:
        """Move each record (a compare-and-swap) into pruned/ in its pruned form, then
        drop the history lines of the pruned keys. CHUNK records per lock hold.

        Dropping lines rewrites history.jsonl whole (mostly outside the lock:
        historyrewrite.drop_keys_briefly): with `defer_history` (a prune paced in
        many calls, engine/prune.py) the keys wait for one
        `drop_deferred_history()` after the last call."""
        from ledger_cli.engine.prune import CHUNK

        self._check_open()
        done: set[str] = set()
        for at in range(0, len(pairs), CHUNK):
            with self._locked(create=False) as root_fd:
                if root_fd is None:
                    return 0
                if self._batch is not None:
                    raise StoreError("ledger: store: prune cannot run inside a batch")
                self.checkpoint(root_fd)  # a write around wal.log (wal.py)
                moved: list[tuple[str, TaskState]] = []
                for old, new in pairs[at : at + CHUNK]:
                    digest = key_digest(old.key)
                    if digest is None:
                        continue
                    cur = self._read_digest(root_fd, digest)
                    if cur is None or cur.cas_tuple() != old.cas_tuple():
                        continue
                    moved.append((digest, new.replace(rev=cur.rev + 1)))
                if not moved:
                    continue
                # The tally and the pruned count do not go through a journal
                # here: removed first (a crash in between leaves them to be
                # rebuilt or counted), written after.
                counts = tally.read_counts(self._root, root_fd)
                # pruned/ checked first: a damaged shard stops the prune, nothing written.
                digests = [digest for digest, _ in moved]
                pruned_before, held = prunedfile.before_append(self._root, root_fd, digests)
                tally.invalidate(self._root, root_fd)
                prunedfile.forget_count(self._root, root_fd)  # counted from the files meanwhile
                # Durable before the record files go.
                held = prunedfile.append(self._root, root_fd, moved, held)
                # A finished record's live/ entry (not yet dropped by a scan)
                # goes first: after its file, it would read as a lost record's.
                liveindex.forget(self._root, root_fd, digests)
                self._drop_dirs()
                shards: set[str] = set()
                rfd = fsutil.open_subdir(
                    root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False
                )
                if rfd is not None:
                    try:
                        for digest, _ in moved:
                            sfd = fsutil.open_subdir(
                                rfd, digest[:2], self._shown(RECORDS_DIR, digest[:2]), create=False
                            )
                            if sfd is not None:
                                try:
                                    fsutil.unlink_quiet(sfd, digest + ".json")
                                    shards.add(digest[:2])
                                    if len(moved) <= apply.SYNC_EACH_MAX:
                                        fsutil.fsync_fd(sfd, self._shown(RECORDS_DIR, digest[:2]))
                                finally:
                                    os.close(sfd)
                    finally:
                        os.close(rfd)
                if len(moved) > apply.SYNC_EACH_MAX and fsutil.sync_filesystem_available():
                    fsutil.sync_filesystem(root_fd, self._root)
                prunedfile.write_count(self._root, root_fd, pruned_before + len(moved), held)
                if counts is not None:
                    gone = [(rec, None) for _, rec in moved]  # a pruned record keeps its status
                    tally.apply(self._root, root_fd, tally.advance(counts, gone), {}, sync=True)
                done.update(rec.key for _, rec in moved)
        if done:
            self._build_missing_tally()
        if done and defer_history:
            self.__dict__.setdefault("_history_to_drop", set()).update(done)
        elif done:
            self._drop_history(done)
        return len(done)

    def _build_missing_tally(self) -> None:
        """Build the tally's counts when a block found them missing (a prune or
        a rebuild cut short before this one: its blocks then leave them as
        they are), in a lock hold of its own, as the next writer would: the
        counts are not left missing after a prune (docs/stores.md)."""
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return
        try:
            if tally.read_counts(self._root, root_fd) is not None:
                return
        finally:
            os.close(root_fd)
        with self._locked(create=False) as root_fd:
            if root_fd is not None and tally.read_counts(self._root, root_fd) is None:
                self._rebuild_tally(root_fd)

    @store_method
    def drop_deferred_history(self) -> None:
        """Drop the history lines of the keys `prune_records(defer_history=True)`
        pruned (one rewrite of history.jsonl, copied outside the lock and renamed
        under it). A crash before it leaves those lines, which nothing reads as
        more than history."""
        keys: set[str] = self.__dict__.pop("_history_to_drop", set())
        if not keys:
            return
        self._check_open()
        self._drop_history(keys)

    def _drop_history(self, keys: set[str]) -> None:
        """Rewrite history.jsonl without the lines of `keys` (historyrewrite.py,
        imported here: only a prune needs it, not the hot commands' start-up)."""
        from ledger_cli.stores.jsonfile import historyrewrite

        historyrewrite.drop_keys_briefly(self._root, self._history_lock, keys)

    @contextlib.contextmanager
    def _history_lock(self) -> Iterator[int | None]:
        """The store lock for one of historyrewrite.drop_keys_briefly's short holds
        (a rewrite around wal.log: the log is checkpointed first, wal.py)."""
        with self._locked(create=False) as root_fd:
            if root_fd is not None:
                self.checkpoint(root_fd)
            yield root_fd

    @store_method
    def restore_pruned(self, records: Sequence[TaskState]) -> str | None:
        """Insert each pruned record where its key has none (engine/prune.py `restore`):
        lines appended to pruned/ in one lock hold (the caller's batch's, when it has
        one), never a record file in between. The first taken key (nothing written),
        else None.

        The lines go around the batch's journal, as a prune's do: they are durable
        when this returns, so a batch that fails to commit afterwards keeps them."""
        self._check_open()
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            batch = self._batch
            placed: list[tuple[str, TaskState]] = []
            for rec in records:
                digest = key_digest(rec.key)
                if digest is None:
                    raise StoreError(
                        f"ledger: store: key {rec.key!r} is not valid Unicode; a JSON file "
                        "store cannot hold it"
                    )
                if self._current(root_fd, rec.key, digest) is not None:
                    return rec.key
                rec.validate()
                placed.append((digest, rec.replace(rev=0, fence=max(rec.fence, self._floor))))
            if not placed:
                return None
            self.checkpoint(root_fd)  # a write around wal.log (wal.py)
            if batch is not None and batch.sides:
                # Their queue and schedule first, durably, as the lines are: a
                # kill between must not leave a pruned record without them.
                from ledger_cli.stores.jsonfile.keyfiles import apply_sides

                keys = {rec.key for _, rec in placed}
                ops = [op for op in batch.side_ops() if op[1] in keys]
                apply_sides(self._root, root_fd, ops, sync=True)
            digests = [digest for digest, _ in placed]
            before, held = prunedfile.before_append(self._root, root_fd, digests)
            prunedfile.forget_count(self._root, root_fd)  # counted from the files meanwhile
            held = prunedfile.append(self._root, root_fd, placed, held)
            prunedfile.write_count(self._root, root_fd, before + len(placed), held)
            if batch is not None:
                batch.pruned = None  # the shards it read have grown
                for digest, rec in placed:  # what this lock holder reads of them now
                    batch.cache[digest] = rec
        return None

    @store_method
    def pruned_range(self) -> Iterator[TaskState]:
        """The pruned records, sorted by key."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return iter(())
            found = [
                r
                for r in prunedfile.read_all(self._root, root_fd)
                if self._read_digest(root_fd, str(key_digest(r.key))) is None
            ]
        return iter(sorted(found, key=lambda rec: byte_order(rec.key)))

    @store_method
    def is_pruned(self, key: str) -> bool:
        self._check_open()
        digest = key_digest(key)
        root_fd = fsutil.open_root(self._root)
        if digest is None or root_fd is None:
            return False
        try:
            if self._read_digest(root_fd, digest) is not None:
                return False
            batch = self._batch
            held = batch.held_pruned if batch is not None and self._holding() else None
            return prunedfile.find(self._root, root_fd, key, digest, held) is not None
        finally:
            os.close(root_fd)

    @store_method
    def commit_stamp(self) -> bytes | None:
        """What changes with every commit, read without the lock; None while one
        is being applied (inside a prune's block too: `pruned/count` is
        missing there). Figures read between two equal stamps saw no commit
        (`stats`: commitstamp.py, docs/design.md §6.5)."""
        from ledger_cli.stores.jsonfile import commitstamp  # stats and watch only

        self._check_open()
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return b""
        try:
            pfd = fsutil.open_subdir(root_fd, PRUNED_DIR, self._shown(PRUNED_DIR), create=False)
            pruned = (
                b""  # nothing was ever pruned
                if pfd is None
                else fsutil.read_in(pfd, PRUNED_COUNT, self._shown(PRUNED_DIR, PRUNED_COUNT))
            )
            return commitstamp.stamp(self._root, root_fd, pruned)
        finally:
            os.close(root_fd)

    @contextlib.contextmanager
    def reads_locked(self) -> Iterator[None]:
        """The store lock held over a reader's reads (they read as without it):
        figures that disagreed without the lock are judged again under it
        (docs/design.md §5.5)."""
        self._check_open()
        with self._locked(create=False):
            yield

    @store_method
    def rewrite_pruned_count(self) -> None:
        """`pruned/count` written again from the shard files (`ledger doctor
        --fix` of a damaged count: prunedcount.CountDamageError)."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is not None:
                prunedfile.rewrite_count(self._root, root_fd)

    @store_method
    def count_pruned(self) -> int:
        self._check_open()
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return 0
        try:
            return prunedfile.count(self._root, root_fd)
        finally:
            os.close(root_fd)
