"""JsonFileStore: the public face of the JSON store (the Store protocol, batches,
history, the claimable-work scan); the parts live in the sibling modules."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import fsutil, historyfile, journal, layout, liveindex, tally, wal
from ledger_cli.stores.jsonfile.commit import CommitMethods
from ledger_cli.stores.jsonfile.depsview import DepsMethods
from ledger_cli.stores.jsonfile.layout import JOURNAL_NAME, LIVE_STATUSES
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
    encode_record,
    key_digest,
)
from ledger_cli.stores.jsonfile.repairs import RepairMethods
from ledger_cli.stores.jsonfile.schedulefile import ScheduleMethods
from ledger_cli.stores.jsonfile.tallyview import TallyMethods

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from ledger_cli.stores.jsonfile import historyfollow


class JsonFileStore(
    RepairMethods,
    CommitMethods,
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
        self._refilling = False
        if allow_network_fs is None:
            allow_network_fs = os.environ.get(layout.ENV_ALLOW_NETWORK_FS) == "1"
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
                if not self._refilling:  # a new key (only this path pays the stat)
                    liveindex.refuse_lost(self._root, root_fd, digest)
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
    def create(self) -> None:
        """Make the store, empty, when it does not exist yet: `ledger restore`
        of a snapshot with no records (a write creates it otherwise)."""
        self._check_open()
        with self._locked(create=True):
            pass

    @contextlib.contextmanager
    def refilling(self) -> Iterator[None]:
        """`ledger restore`: the inserts inside may fill the key of a lost record
        (its live/ marker left, its file gone: liveindex.refuse_lost), which
        every other write refuses."""
        before, self._refilling = self._refilling, True
        try:
            yield
        finally:
            self._refilling = before

    @store_method
    def by_status(self, statuses: Iterable[str], *, drop_lost: bool = False) -> list[TaskState]:
        """Records whose status is one of `statuses`, oldest CreatedAt first, then key.

        For pending/claimed (the claimable-work scan) only the records indexed
        under live/ are read, so finished records cost nothing; other statuses
        need a full scan. A lost record there (its file missing, not pruned) is
        a StoreError, not an answer without it; `drop_lost` (doctor --fix
        --drop-damaged, the fence floor raised) drops its entry instead
        (liveindex.scan_live). So is a live/ that lists fewer live records
        than the tally counts (a lost entry): one small file read, no scan;
        while the tally is not built, against the records, counted by a scan.
        """
        self._check_open()
        wanted = frozenset(str(s) for s in statuses)
        if not wanted:
            return []
        if not wanted <= LIVE_STATUSES:
            records: Iterable[TaskState] = (r for r in self.visible_range() if r.status in wanted)
        else:
            try:
                records = (r for r in self._live_records(drop_lost) if r.status in wanted)
            except (liveindex.LostRecordError, liveindex.LiveIndexDamage):
                raise  # a missing row is no bad row to go around (§5.5)
            except StoreError:
                if self.bad_rows is None:
                    raise
                # a listing goes around a bad record (§5.5): every file's, the
                # files that decode; what else failed fails again there
                records = (r for r in self.visible_range() if r.status in wanted)
        return sorted(records, key=lambda r: (r.created_at, byte_order(r.key)))

    def _live_records(self, drop_lost: bool) -> list[TaskState]:
        """The records the live/ index names that are live, under the lock
        (`drop_lost`: see `by_status`)."""
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            counted = tally.read_counts(self._root, root_fd)
            tallied = counted is not None
            if counted is None and not drop_lost:
                # The tally is not built (an older store, a prune or a rebuild
                # cut short): live/ is checked against the records themselves,
                # counted in this hold, as readers read them meanwhile.
                counted = tally.count(self._scan_unswept(root_fd, fresh=True).values())
            found = liveindex.scan_live(
                self._root,
                root_fd,
                lambda digest: self._read_digest(root_fd, digest),
                drop_lost=drop_lost,
                counted=counted,
                tallied=tallied,
            )
            batch = self._batch
            if batch is not None and batch.mine():
                for digest, (rec, _) in batch.records.items():
                    found[digest] = rec
        return list(found.values())

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
                        outer.side_undo.clear()
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
                if batch.pending():
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
        """History entries oldest first, streamed: `log` prints each as it is
        read. A file that ends mid-line is looked at again under the lock: a
        StoreDamageError when it still does, as writers refuse it."""
        self._check_open()
        batch = self._batch
        pending = list(batch.history) if batch is not None and batch.mine() else []
        return historyfile.stream(self._root, key, pending, self._refuse_torn_history)

    @store_method
    def refuse_damage(self) -> None:
        """Before a write that cannot be undone in part (`ledger restore`: its
        pruned lines land before its records' commit), what
        that commit would refuse: a damaged tally, a lost or torn history
        (StoreDamageError, nothing written)."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return
            tally.read_counts(self._root, root_fd)
            lost = historyfile.damage(self._root, root_fd)
            if lost is not None:
                raise lost
            self._refuse_torn_history()  # under the lock it holds: damage

    def _refuse_torn_history(self) -> None:
        """A read met a torn last line: an append in progress, or damage when
        it is still there under the store lock, whose taking replays the
        journal and wal.log (cutting a crash's torn line)."""
        with io_errors(self._root), self._locked(create=False) as root_fd:
            if root_fd is not None and historyfile.torn_tail(self._root, root_fd) is not None:
                raise historyfile.damaged_history(self._shown(layout.HISTORY_NAME))

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
