"""JsonFileStore: the public face of the JSON store (the Store protocol, batches,
history, the claimable-work scan); the parts live in the sibling modules."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import (
    apply,
    fsutil,
    historyfile,
    journal,
    layout,
    liveindex,
    tally,
    wal,
)
from ledger_cli.stores.jsonfile.depsview import DepsMethods
from ledger_cli.stores.jsonfile.layout import (
    JOURNAL_NAME,
    LIVE_STATUSES,
    RECORDS_DIR,
)
from ledger_cli.stores.jsonfile.locking import (
    DEFAULT_LOCK_TIMEOUT,
    PendingBatch,
    io_errors,
    store_method,
)
from ledger_cli.stores.jsonfile.pausefile import PauseMethods
from ledger_cli.stores.jsonfile.pruning import PruneMethods
from ledger_cli.stores.jsonfile.queuefile import QueueMethods
from ledger_cli.stores.jsonfile.readyview import ReadyMethods
from ledger_cli.stores.jsonfile.records import (
    decode_record_file,
    encode_record,
    key_digest,
)
from ledger_cli.stores.jsonfile.schedulefile import ScheduleMethods
from ledger_cli.stores.jsonfile.tallyview import TallyMethods

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from ledger_cli.stores.jsonfile import attemptfiles, historyfollow


class JsonFileStore(
    TallyMethods,
    ReadyMethods,
    PruneMethods,
    DepsMethods,
    PauseMethods,
    ScheduleMethods,
    QueueMethods,
):
    """A directory of JSON records; safe under many concurrent processes.

    `lock_timeout` bounds the wait for the store lock (StoreError after it).
    `fair_lock=False` drops the FIFO queue in front of filelock (benchmarks).
    A directory on a network file system (NFS, SMB, 9p, FUSE…) is refused —
    advisory locks there do not exclude other hosts — unless `allow_network_fs`
    (default: the environment variable LEDGER_ALLOW_NETWORK_FS=1) says so.
    `repair_log` sets a damaged wal.log aside instead of refusing it
    (`doctor --fix`, wal.recover).
    """

    @store_method
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        fair_lock: bool = True,
        allow_network_fs: bool | None = None,
        repair_log: wal.Repair = "no",
    ) -> None:
        root = os.path.abspath(os.fspath(path))
        self._repair_log = repair_log
        self.log_repaired: tuple[str, bool] | None = None
        """What `repair_log` (doctor --fix) did to a damaged wal.log, and
        whether writes were lost, if it did anything."""
        self._root = root
        if allow_network_fs is None:
            allow_network_fs = os.environ.get(fsutil.ENV_ALLOW_NETWORK_FS) == "1"
        if not allow_network_fs:
            layout.refuse_network_fs(root)
        super().__init__(root, lock_timeout, fair_lock)
        # Refuse early (unknown version, records without metadata) and finish a
        # batch that a crash interrupted, before anyone reads.
        root_fd = fsutil.open_root(self._root)
        if root_fd is not None:
            try:
                if self._read_meta(root_fd) is not None and (
                    layout.exists(self._root, root_fd, JOURNAL_NAME)
                    or wal.pending(self._root, root_fd) is not None
                ):
                    with self._locked(create=False):
                        pass  # acquiring the lock replays the journal, then the log
            finally:
                os.close(root_fd)

    # -- public API ------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._root

    @property
    @store_method
    def fence_floor(self) -> int:
        """The store-wide fence floor kept in the metadata file (0 for a new store)."""
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return 0
        try:
            meta = self._read_meta(root_fd)
        finally:
            os.close(root_fd)
        return 0 if meta is None else int(meta["fence_floor"])

    @store_method
    def check_record_file(self, data: bytes, shown: str, digest: str) -> TaskState:
        """Decode a record file's bytes as the store reads them (`ledger doctor`):
        checksum, wire record, validation, and the file name (`digest`) of its key."""
        return decode_record_file(data, shown, checksummed=self._checksummed, digest=digest)

    @store_method
    def load(self, key: str) -> TaskState | None:
        self._check_open()
        digest = key_digest(key)
        if digest is None:
            return None
        if self._holding():
            assert self._root_fd is not None
            return self._current(self._root_fd, key, digest)
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return None
        try:
            if not self._meta_seen and not self._initialized(root_fd):
                return None
            return self._read_record(root_fd, key, digest)
        finally:
            os.close(root_fd)

    @store_method
    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        self._check_open()
        digest = key_digest(key)
        if digest is None:
            raise StoreError(
                f"ledger: store: key {key!r} is not valid Unicode; a JSON file store cannot hold it"
            )
        if new.key != key:
            raise StoreError(
                f"ledger: store: record key {new.key!r} does not match the store key {key!r}"
            )
        new.validate()  # never write what load() would refuse
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            batch = self._batch
            on_file: TaskState | None = None
            if batch is None:
                on_file = self._read_digest(root_fd, digest)  # the record file's, not pruned/
                cur = on_file if on_file is not None else self._read_record(root_fd, key, digest)
            else:
                cur = self._current(root_fd, key, digest)
            if cur is None:
                if old is not None:
                    return False
                if new.rev != 0 or new.fence < self._floor:
                    new = new.replace(rev=0, fence=max(new.fence, self._floor))
            else:
                if old is None or old.cas_tuple() != cur.cas_tuple():
                    return False
                new = new.replace(rev=cur.rev + 1)
            data = encode_record(new)
            if batch is not None:
                batch.put(digest, new, data)
                return True
            one = {digest: (new, data)}
            counts, moved = self._tally_after(root_fd, one, lambda d: on_file)
            one_call = PendingBatch()
            one_call.records = one
            one_call.moved = moved
            journal.commit(
                self._root,
                root_fd,
                one_call,
                lambda *a, **k: self._write_records(*a, before={digest: cur}, **k),
                counts,
            )
            return True

    @store_method
    def by_status(self, statuses: Iterable[str]) -> list[TaskState]:
        """Records whose status is one of `statuses`, oldest CreatedAt first, then key.

        For pending/claimed (the claimable-work scan) only the records indexed
        under live/ are read, so finished records cost nothing; other statuses
        need a full scan.
        """
        self._check_open()
        wanted = frozenset(str(s) for s in statuses)
        if not wanted:
            return []
        if not wanted <= LIVE_STATUSES:
            records: Iterable[TaskState] = (r for r in self.visible_range() if r.status in wanted)
        else:
            with self._locked(create=False) as root_fd:
                if root_fd is None:
                    return []
                found = liveindex.scan_live(
                    self._root, root_fd, lambda digest: self._read_digest(root_fd, digest)
                )
                batch = self._batch
                if batch is not None and batch.mine():
                    for digest, (rec, _) in batch.records.items():
                        found[digest] = rec
            records = (r for r in found.values() if r.status in wanted)
        return sorted(records, key=lambda r: (r.created_at, byte_order(r.key)))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group commit: writes inside are durable together when the outermost batch
        exits (one lock hold, one journal, one sync). Re-entrant. An exception
        leaving the outermost batch discards its writes (nothing is written)."""
        self._check_open()
        with self._mutex:
            if self._batch is not None:  # nested: a savepoint; the outermost batch commits
                outer = self._batch
                mark = outer.mark()
                outer.marks.append(mark)
                try:
                    yield
                except BaseException:
                    outer.rollback(mark)
                    raise
                finally:
                    outer.marks.pop()
                    if not outer.marks:
                        outer.undo.clear()
                return
            batch = PendingBatch()
            # Lock now if the store exists; otherwise the first write inside the
            # batch creates it and takes the lock (reads alone create nothing).
            with io_errors(self._root):
                self._fill_spares()
                if self._enter(create=False):
                    batch.owns_lock = True
            self._batch = batch
            try:
                yield
                if batch.records or batch.history or batch.attempts:
                    root_fd = self._root_fd
                    assert root_fd is not None
                    with io_errors(self._root):
                        counts, batch.moved = self._tally_after(
                            root_fd, batch.records, lambda d: self._on_file(root_fd, batch, d)
                        )
                        journal.commit(self._root, root_fd, batch, self._write_records, counts)
            finally:
                self._batch = None
                if batch.owns_lock:
                    with io_errors(self._root):
                        self._exit()

    @store_method
    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        self._check_open()
        if not entries:
            return
        try:
            lines = [(entry.to_json() + "\n").encode("utf-8") for entry in entries]
        except UnicodeEncodeError:
            raise StoreError(
                "ledger: store: a history entry is not valid Unicode (a lone surrogate)"
            ) from None
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            batch = self._batch
            if batch is not None:
                batch.history.extend(lines)
            else:
                one_call = PendingBatch()
                one_call.history = lines
                journal.commit(self._root, root_fd, one_call, self._write_records)

    @store_method
    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """History entries oldest first, streamed (a torn last line, left by a crash
        or an append in progress, is skipped): `log` prints each as it is read."""
        self._check_open()
        batch = self._batch
        pending = list(batch.history) if batch is not None and batch.mine() else []
        return historyfile.stream(self._root, key, pending)

    def history_follower(self) -> historyfollow.HistoryFollower:
        """`ledger log --follow`: reads history.jsonl from where it stopped
        (historyfollow.py), without the lock."""
        from ledger_cli.stores.jsonfile.historyfollow import HistoryFollower

        self._check_open()
        return HistoryFollower(self._root)

    def close(self) -> None:
        self._closed = True
        with io_errors(self._root):
            self._spares.close()

    def __enter__(self) -> JsonFileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonFileStore({self._root!r})"

    # -- under the lock --------------------------------------------------------------

    def _recover(self, root_fd: int) -> None:
        # A journal is written only while the log is empty (journal.commit), so
        # it goes first; then the log's frames a crash left unapplied (wal.py).
        data = fsutil.read_file(root_fd, JOURNAL_NAME, self._shown(JOURNAL_NAME))
        if data is not None:
            journal.replay(self._root, root_fd, data, self._checksummed, self._write_records)
        how = wal.Replay(
            lambda frame: journal.apply_again(
                self._root,
                root_fd,
                frame,
                self._checksummed,
                self._write_records,
                wal.WAL_NAME,
                "log",
            ),
            lambda frames: self._rewrite_logged(root_fd, frames),
            lambda: journal.drop_indexes(self._root, root_fd),
        )
        done = wal.recover(self._root, root_fd, how, self._repair_log)
        if done is not None:
            self.log_repaired = done

    def _rewrite_logged(self, root_fd: int, frames: list[bytes]) -> None:
        """After a restart of the machine: every record the log names, written
        with its newest bytes before anything reads records (wal.recover)."""
        newest: dict[str, bytes] = {}
        for frame in frames:
            for digest, (_, data) in journal.decode_records(
                self._root, frame, self._checksummed, wal.WAL_NAME
            ).items():
                newest[digest] = data
        rfd = fsutil.open_subdir(root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=True)
        assert rfd is not None
        try:
            for digest, data in newest.items():
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

    def _on_file(self, root_fd: int, batch: PendingBatch, digest: str) -> TaskState | None:
        """The record file of `digest` as on disk before `batch` (not pruned/)."""
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
        *,
        before: dict[str, TaskState | None] | None = None,
    ) -> None:
        """Apply writes durably (`attempts`: attempt files, journalled with them;
        `moved`: the records whose tally membership changes, None: all).
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
            *self._attempt_writes(root_fd, attempts),
            moved=moved,
            on_disk=known.get,
        )
        # A large commit: a run of them (chunked) likely goes on, so files for
        # the next one are made before it takes the lock.
        self._spares.plan(len(records) if len(records) > apply.SYNC_EACH_MAX else 0)

    def _attempt_writes(
        self, root_fd: int, attempts: list[attemptfiles.Op] | None
    ) -> tuple[Callable[..., None] | None, int]:
        """The attempt files' writes for `apply` and their fsyncs; attemptfiles
        is imported only by a commit that carries some (start-up: docs/design.md §5.1)."""
        if not attempts:
            return None, 0
        from ledger_cli.stores.jsonfile import attemptfiles

        root = self._root
        writes = lambda *a, **k: attemptfiles.apply_ops(root, root_fd, attempts, *a, **k)  # noqa: E731
        return writes, attemptfiles.op_fsyncs(attempts)
