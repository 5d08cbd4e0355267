"""How a commit's writes reach the JSON store, and how a new lock holder
finishes those a crash interrupted: the tally counts a commit leaves
(tally.py), the writes `journal.commit` applies (apply.py, with the
attempt files' and side files' when it carries some: a key's queue or
schedule, staged by `_stage_side`), and the recovery of the journal, then
of wal.log (wal.py). JsonFileStore (store.py) builds its batches on these."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import apply, fsutil, historyfile, journal, tally, wal
from ledger_cli.stores.jsonfile.layout import JOURNAL_NAME, LIVE_STATUSES, RECORDS_DIR
from ledger_cli.stores.jsonfile.locking import PendingBatch
from ledger_cli.stores.jsonfile.reading import RecordReader
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from ledger_cli.engine.record import TaskState
    from ledger_cli.stores.jsonfile import attemptfiles
    from ledger_cli.stores.jsonfile.keyfiles import KeyFiles, SideOp

    _V = TypeVar("_V")


class CommitMethods(RecordReader):
    _repair_log: wal.Repair
    log_repaired: tuple[str, bool] | None

    if TYPE_CHECKING:

        def _rebuild_tally(self, root_fd: int) -> tally.Counts: ...

        def _rebuild_ready(self, root_fd: int) -> None: ...

        def _rebuild_deps(self, root_fd: int) -> None: ...

    def _recover(self, root_fd: int) -> None:
        # A journal is written only while the log is empty (journal.commit), so
        # it goes first; then the log's frames a crash left unapplied (wal.py).
        data = fsutil.read_file(root_fd, JOURNAL_NAME, self._shown(JOURNAL_NAME))
        if data is not None:
            journal.replay(self._root, root_fd, data, self._checksummed, self._write_records)
        how = self._replay(root_fd)
        done = wal.recover(
            self._root, root_fd, how, self._repair_log, lambda: self._mark_damaged(root_fd)
        )
        if done is not None:
            self.log_repaired = done

    def _mark_damaged(self, root_fd: int) -> bool:
        """Whether wal.applied, which the log does not hold, is the damage (walcheck.py)."""
        from ledger_cli.stores.jsonfile import walcheck  # a damaged log or mark only

        return walcheck.mark_damaged(self._root, root_fd)

    def _replay(self, root_fd: int) -> wal.Replay:
        """How wal.py applies this store's frames (wal.recover, wal.set_aside)."""
        return wal.Replay(
            lambda frame, cut_short: journal.apply_again(
                self._root,
                root_fd,
                frame,
                self._checksummed,
                self._write_kept(root_fd) if cut_short else self._write_records,
                wal.WAL_NAME,
                "log",
            ),
            lambda frames, cut_short: self._rewrite_logged(root_fd, frames, cut_short),
            lambda: journal.drop_indexes(self._root, root_fd),
        )

    def _rewrite_logged(self, root_fd: int, frames: list[bytes], cut_short: bool) -> None:
        """After a restart of the machine: every record the log names, written
        with its newest bytes before anything reads records (wal.recover);
        `cut_short` (frames before a damage): not over a newer record file."""
        newest: dict[str, tuple[TaskState, bytes]] = {}
        for frame in frames:
            newest.update(
                journal.decode_records(self._root, frame, self._checksummed, wal.WAL_NAME)
            )
        if cut_short:
            newest = self._not_newer_on_disk(root_fd, newest)[0]
        rfd = fsutil.open_subdir(root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=True)
        assert rfd is not None
        try:
            for digest, (_, data) in newest.items():
                sfd = fsutil.open_subdir(
                    rfd, digest[:2], self._shown(RECORDS_DIR, digest[:2]), create=True
                )
                assert sfd is not None
                try:
                    path = self._shown(RECORDS_DIR, digest[:2], digest + ".json")
                    fsutil.replace_file(sfd, digest + ".json", data, path, sync=False)
                finally:
                    os.close(sfd)
        finally:
            os.close(rfd)

    def _not_newer_on_disk(
        self, root_fd: int, records: dict[str, tuple[TaskState, bytes]]
    ) -> tuple[dict[str, tuple[TaskState, bytes]], set[str]]:
        """`records` but those whose record file on disk is intact and newer (a
        higher Rev: written after them, by a frame past a damage, so committed),
        and the digests of those left out."""
        newer: set[str] = set()
        for digest, (rec, _) in records.items():
            try:
                on_disk = self._read_digest(root_fd, digest)
            except StoreError:
                continue  # damaged: the frame's record is the one to keep
            if on_disk is not None and on_disk.rev > rec.rev:
                newer.add(digest)
        return {d: r for d, r in records.items() if d not in newer}, newer

    def _staged_side(self, files: KeyFiles[_V], key: str) -> tuple[_V | None] | None:
        """What the open batch of this thread wrote to `key`'s side file of
        `files`' kind, not committed yet: (value,) ((None,): removed); None
        when it wrote none (the file on disk holds)."""
        batch = self._batch
        if batch is None or not batch.sides or not batch.mine():
            return None
        slot = (files.dirname, key)
        if slot not in batch.sides:
            return None
        data = batch.sides[slot]
        if data is None:
            return (None,)
        return (files.decode(data, self._shown(files.dirname))[1],)

    def _with_staged(self, files: KeyFiles[_V]) -> dict[str, _V]:
        """Every key's value of `files`' kind (KeyFiles.all), with what the open
        batch of this thread wrote and has not committed yet."""
        found = files.all()
        batch = self._batch
        if batch is None or not batch.sides or not batch.mine():
            return found
        for dirname, key in list(batch.sides):
            if dirname == files.dirname:
                staged = self._staged_side(files, key)
                assert staged is not None
                if staged[0] is None:
                    found.pop(key, None)
                else:
                    found[key] = staged[0]
        return found

    def _stage_side(self, files: KeyFiles[_V], key: str, body: dict[str, object] | None) -> None:
        """Write `key`'s side file of `files`' kind (`body`; None: remove it)
        with the open batch, else as a batch of one: its commit carries it
        (journal.py) and its apply writes it before the records (apply.py).
        A removal of no file changes nothing."""
        if body is None and key_digest(key) is None:
            return  # no file can name it: there is none to remove
        data = files.encode(key, body)
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            batch = self._batch
            staged = batch is not None and (files.dirname, key) in batch.sides
            if data is None and not staged and not files.exists(key):
                return
            if batch is not None:
                batch.put_side(files.dirname, key, data)
                return
            one_call = PendingBatch()
            one_call.put_side(files.dirname, key, data)
            journal.commit(self._root, root_fd, one_call, self._write_records)

    def _write_kept(self, root_fd: int) -> journal.WriteRecords:
        """`_write_records` for a frame before a damage in wal.log (doctor --fix
        --drop-damaged): a frame past the damage may have written records,
        attempt files and history lines after it, which are kept, never rolled
        back. The tally and indexes are rebuilt after (wal._apply)."""

        def write(
            records: dict[str, tuple[TaskState, bytes]],
            history: list[bytes],
            history_at: int | None,
            counts: tally.Counts | None,
            durable: apply.Durability,
            attempts: list[attemptfiles.Op],
            moved: set[str] | None,
            sides: list[SideOp] | None = None,
        ) -> None:
            records, newer = self._not_newer_on_disk(root_fd, records)
            attempts = [op for op in attempts if op[0] not in newer]
            sides = [op for op in sides or () if key_digest(op[1]) not in newer]
            if history_at is not None and historyfile.holds(
                self._root, root_fd, history, history_at
            ):
                history, history_at = [], None  # in place: a cut would drop later lines
            self._write_records(records, history, history_at, None, durable, attempts, None, sides)

        return write

    def _on_file(self, root_fd: int, batch: PendingBatch, digest: str) -> TaskState | None:
        """The record file of `digest` as on disk before `batch` (not pruned/)."""
        if digest in batch.files:
            return batch.files[digest]
        if digest in batch.cache and batch.cache[digest] is None:
            return None
        return self._read_digest(root_fd, digest)

    def _tally_after(
        self,
        root_fd: int,
        records: dict[str, tuple[TaskState, bytes]],
        on_file: Callable[[str], TaskState | None],
    ) -> tuple[tally.Counts | None, set[str]]:
        """The tally counts once `records` are written (tally.py), None when
        they change no count and no noted set, and the records whose noted
        membership changes (tally.noted_moves). A tally not built is built first."""
        items = [(digest, on_file(digest), rec) for digest, (rec, _) in records.items()]
        if not any(tally.changes(before, after) for _, before, after in items):
            return None, set()
        counts = tally.read_counts(self._root, root_fd)
        if counts is None:
            counts = self._rebuild_tally(root_fd)
        pairs = [(before, after) for _, before, after in items]
        return tally.advance(counts, pairs), tally.noted_moves(items)

    def _write_records(
        self,
        records: dict[str, tuple[TaskState, bytes]],
        history: list[bytes],
        history_at: int | None,
        counts: tally.Counts | None = None,
        journaled: apply.Durability = "now",
        attempts: list[attemptfiles.Op] | None = None,
        moved: set[str] | None = None,
        sides: list[SideOp] | None = None,
        *,
        before: dict[str, TaskState | None] | None = None,
    ) -> None:
        """Apply writes durably (`attempts`: attempt files, journalled with them;
        `moved`: the records whose tally membership changes, None: all;
        `sides`: the side files, keyfiles.py).
        `before`: the records as they are on disk (read under this lock
        hold), by digest; default the open batch's cache."""
        root_fd = self._root_fd
        assert root_fd is not None
        self._drop_dirs()  # this may create directories a cached lookup found missing
        if records:
            # The records `one_scan`'s checks would take (doctor's walk, read
            # before `--fix` wrote) are stale now: the next check reads them
            # again, without the lock, rather than find the problems just
            # fixed and confirm them by a scan of every record under it.
            self._seen = self._one_scan = None
        batch = self._batch
        cache = batch.cache if batch is not None else {}
        known = cache if before is None else before

        def indexed(digest: str) -> bool:
            # Read from disk under this lock hold: a live one is in live/ already.
            rec = cache.get(digest)
            return rec is not None and rec.status in LIVE_STATUSES

        def listed_needs(digest: str) -> frozenset[str] | None:
            # The deps/ index lists a record on disk under each of its needs.
            if digest not in known:
                return None
            rec = known[digest]
            return frozenset(rec.needs or ()) if rec is not None else frozenset()

        def completed_before(digest: str) -> bool:
            # Completed on disk already: its dependents were promoted then.
            rec = known.get(digest)
            return rec is not None and rec.status == "completed"

        apply.write_records(
            self._root,
            root_fd,
            records,
            history,
            history_at,
            lambda digest: self._read_digest(root_fd, digest),
            lambda: self._rebuild_ready(root_fd),
            lambda key, digest: self._read_record(root_fd, key, digest),
            indexed,
            self._spares.take,
            listed_needs,
            lambda: self._rebuild_deps(root_fd),
            completed_before,
            counts,
            journaled,
            *self._attempt_writes(
                root_fd, attempts, fresh=batch is not None and attempts is batch.attempts
            ),
            moved=moved,
            on_disk=known.get,
            sides=sides or (),
        )
        # A large commit: a run of them (chunked) likely goes on, so files for
        # the next one are made before it takes the lock.
        self._spares.plan(len(records) if len(records) > apply.SYNC_EACH_MAX else 0)

    def _attempt_writes(
        self, root_fd: int, attempts: list[attemptfiles.Op] | None, *, fresh: bool
    ) -> tuple[Callable[..., None] | None, int]:
        """The attempt files' writes for `apply` and their fsyncs (`fresh`: the
        open batch's own, not a replay's); attemptfiles is imported only by a
        commit that carries some (start-up: docs/design.md §5.1)."""
        if not attempts:
            return None, 0
        from ledger_cli.stores.jsonfile import attemptfiles

        root = self._root
        writes = lambda *a, **k: attemptfiles.apply_ops(  # noqa: E731
            root, root_fd, attempts, *a, fresh=fresh, **k
        )
        return writes, attemptfiles.op_fsyncs(attempts)
