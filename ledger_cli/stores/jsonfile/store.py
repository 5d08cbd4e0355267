"""JsonFileStore: the public face of the JSON store (the Store protocol, batches,
history, the claimable-work scan); the parts live in the sibling modules."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence

from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError
from ledger_cli.stores import _fsutil
from ledger_cli.stores._fsutil import fail
from ledger_cli.stores.history import HistoryEntry
from ledger_cli.stores.jsonfile import (
    apply,
    historyfile,
    journal,
    layout,
    liveindex,
    prunedfile,
    readyindex,
)
from ledger_cli.stores.jsonfile.batch import PendingBatch
from ledger_cli.stores.jsonfile.layout import (
    HISTORY_NAME,
    JOURNAL_NAME,
    LIVE_STATUSES,
    RECORDS_DIR,
)
from ledger_cli.stores.jsonfile.locking import (
    DEFAULT_LOCK_TIMEOUT,
    LockedDirectory,
    io_errors,
    store_method,
)
from ledger_cli.stores.jsonfile.records import (
    decode_record_file,
    encode_record,
    key_digest,
    scan_records,
)

_READY_PAGE = 8
"""Ready-index entries examined per lock hold by `ready_candidates`."""


class JsonFileStore(LockedDirectory):
    """A directory of JSON records; safe under many concurrent processes.

    `lock_timeout` bounds the wait for the store lock (StoreError after it).
    `fair_lock=False` drops the FIFO queue in front of filelock (benchmarks).
    A directory on a network file system (NFS, SMB, 9p, FUSE…) is refused —
    advisory locks there do not exclude other hosts — unless `allow_network_fs`
    (default: the environment variable LEDGER_ALLOW_NETWORK_FS=1) says so.
    """

    @store_method
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        fair_lock: bool = True,
        allow_network_fs: bool | None = None,
    ) -> None:
        root = os.path.abspath(os.fspath(path))
        self._root = root
        if allow_network_fs is None:
            allow_network_fs = os.environ.get(_fsutil.ENV_ALLOW_NETWORK_FS) == "1"
        if not allow_network_fs:
            layout.refuse_network_fs(root)
        super().__init__(root, lock_timeout, fair_lock)
        # Refuse early (unknown version, records without metadata) and finish a
        # batch that a crash interrupted, before anyone reads.
        root_fd = _fsutil.open_root(self._root)
        if root_fd is not None:
            try:
                if self._read_meta(root_fd) is not None and layout.exists(
                    self._root, root_fd, JOURNAL_NAME
                ):
                    with self._locked(create=False):
                        pass  # acquiring the lock replays the journal
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
        root_fd = _fsutil.open_root(self._root)
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
        root_fd = _fsutil.open_root(self._root)
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
            batch = self._batch
            if batch is not None:
                batch.put(digest, new, data)
            else:
                self._write_records({digest: (new, data)}, [], None)
            return True

    @store_method
    def range(self) -> Iterator[TaskState]:
        """Every record, pruned ones included, sorted by key (UTF-8 byte order),
        read under the lock."""
        return self._range(pruned=True)

    @store_method
    def visible_range(self) -> Iterator[TaskState]:
        """Every record but the pruned ones (`list`, `tree`): pruned/ is not read."""
        return self._range(pruned=False)

    def scan_visible(self) -> Iterator[TaskState]:
        """Every record but the pruned ones, streamed in storage order (shard by
        shard, not key order) without the lock: `list --jsonl` prints each row as
        it is read, in constant memory. A record file is replaced atomically, so
        each one read is whole; records written meanwhile may or may not appear."""
        self._check_open()
        with io_errors(self._root):
            root_fd = _fsutil.open_root(self._root)
            if root_fd is None:
                return
            try:
                if not self._meta_seen and not self._initialized(root_fd):
                    return
                rfd = _fsutil.open_subdir(
                    root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False
                )
            finally:
                os.close(root_fd)
            if rfd is None:
                return
            try:
                for shard in sorted(os.listdir(rfd)):
                    if not layout.SHARD.fullmatch(shard):
                        continue
                    path = self._shown(RECORDS_DIR, shard)
                    sfd = _fsutil.open_subdir(rfd, shard, path, create=False)
                    if sfd is None:
                        continue
                    try:
                        names = sorted(os.listdir(sfd))
                        for fname in names:
                            if not layout.RECORD_FILE.fullmatch(fname):
                                continue
                            shown = self._shown(RECORDS_DIR, shard, fname)
                            data = _fsutil.read_file(sfd, fname, shown)
                            if data is not None:
                                yield decode_record_file(
                                    data, shown, checksummed=self._checksummed, digest=fname[:-5]
                                )
                    finally:
                        os.close(sfd)
            finally:
                os.close(rfd)

    def _range(self, *, pruned: bool) -> Iterator[TaskState]:
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return iter(())
            found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=True)
            if pruned:
                seen = {rec.key for rec in found.values()}
                extra = [r for r in prunedfile.read_all(self._root, root_fd) if r.key not in seen]
            layout.sweep_root(self._root, root_fd)
            self._lock.sweep(root_fd)
            batch = self._batch
            if batch is not None and batch.mine():
                for digest, (rec, _) in batch.records.items():
                    found[digest] = rec
        records = list(found.values())
        if pruned:
            records += [r for r in extra if key_digest(r.key) not in found]
        return iter(sorted(records, key=lambda rec: byte_order(rec.key)))

    # -- prune (SPEC §6.4; engine/prune.py, prunedfile.py) ----------------------------

    @store_method
    def prune_records(self, pairs: Sequence[tuple[TaskState, TaskState]]) -> int:
        """Move each record (a compare-and-swap) into pruned/ in its pruned form, then
        drop the history lines of the pruned keys. CHUNK records per lock hold."""
        from ledger_cli.engine.prune import CHUNK

        self._check_open()
        done: set[str] = set()
        for at in range(0, len(pairs), CHUNK):
            with self._locked(create=False) as root_fd:
                if root_fd is None:
                    return 0
                if self._batch is not None:
                    raise StoreError("ledger: store: prune cannot run inside a batch")
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
                prunedfile.append(self._root, root_fd, moved)  # durable before the files go
                self._drop_dirs()
                shards: set[str] = set()
                rfd = _fsutil.open_subdir(
                    root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False
                )
                if rfd is not None:
                    try:
                        for digest, _ in moved:
                            sfd = _fsutil.open_subdir(
                                rfd, digest[:2], self._shown(RECORDS_DIR, digest[:2]), create=False
                            )
                            if sfd is not None:
                                try:
                                    _fsutil.unlink_quiet(sfd, digest + ".json")
                                    shards.add(digest[:2])
                                    if len(moved) <= apply.SYNC_EACH_MAX:
                                        _fsutil.fsync_fd(sfd, self._shown(RECORDS_DIR, digest[:2]))
                                finally:
                                    os.close(sfd)
                    finally:
                        os.close(rfd)
                if len(moved) > apply.SYNC_EACH_MAX and _fsutil.sync_filesystem_available():
                    _fsutil.sync_filesystem(root_fd, self._root)
                prunedfile.add_count(self._root, root_fd, len(moved))
                done.update(rec.key for _, rec in moved)
        if done:
            with self._locked(create=False) as root_fd:
                assert root_fd is not None
                historyfile.drop_keys(self._root, root_fd, done)
        return len(done)

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
        root_fd = _fsutil.open_root(self._root)
        if digest is None or root_fd is None:
            return False
        try:
            if self._read_digest(root_fd, digest) is not None:
                return False
            return prunedfile.find(self._root, root_fd, key, digest) is not None
        finally:
            os.close(root_fd)

    @store_method
    def count_pruned(self) -> int:
        self._check_open()
        root_fd = _fsutil.open_root(self._root)
        if root_fd is None:
            return 0
        try:
            return prunedfile.count(self._root, root_fd)
        finally:
            os.close(root_fd)

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

    def ready_candidates(self) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed, oldest
        CreatedAt first, then key, read through the ready/ index (the caller
        applies the rest of the Ready rule: lease expiry, the transitive walk).
        Stale index entries met on the way are dropped. Each step holds the
        lock; writes of the caller's own open batch are not in the index."""
        self._check_open()
        after: readyindex.Entry | None = None
        while True:
            with io_errors(self._root), self._locked(create=False) as root_fd:
                if root_fd is None:
                    return
                page, after = self._ready_page(root_fd, after)
            if after is None:
                yield from page
                return
            yield from page

    def _ready_page(
        self, root_fd: int, after: readyindex.Entry | None
    ) -> tuple[list[TaskState], readyindex.Entry | None]:
        """The live candidates of the chunk holding the first entry past `after`,
        and the last entry looked at (None: the index ends there)."""
        rfd = readyindex.open_dir(self._root, root_fd, create=False)
        chunks = None if rfd is None else readyindex.load_chunks(self._root, root_fd, rfd)
        if chunks is None:
            if rfd is not None:
                os.close(rfd)
            self._rebuild_ready(root_fd)
            rfd = readyindex.open_dir(self._root, root_fd, create=False)
            assert rfd is not None
            chunks = readyindex.load_chunks(self._root, root_fd, rfd)
            assert chunks is not None
        try:

            def load(key: str) -> TaskState | None:
                digest = key_digest(key)
                return None if digest is None else self._current(root_fd, key, digest)

            pos = 0 if after is None else chunks.locate(after)
            while pos < len(chunks.ids):
                entries = [e for e in chunks.chunk(pos) if after is None or e > after]
                if entries:
                    break
                pos += 1
            else:
                return [], None
            found: list[TaskState] = []
            stale: list[readyindex.Entry] = []
            # A few live candidates per lock hold (claim --next needs the first).
            entries = entries[:_READY_PAGE]
            for entry in entries:
                key = readyindex.key_of(entry)
                rec = load(key)
                if (
                    rec is None
                    or readyindex.entry_of(rec) != entry
                    or not readyindex.is_candidate(rec, load)
                ):
                    stale.append(entry)
                else:
                    found.append(rec)
            if stale:
                chunks.remove(stale)
            return found, entries[-1]
        finally:
            _fsutil.close_all([rfd])

    @store_method
    def check_ready_index(self) -> list[str]:
        """Problems of the ready/ index against the records (`ledger doctor`): a
        candidate it misses, a waiting record its reverse-needs index misses."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
            by_key = {rec.key: rec for rec in prunedfile.read_all(self._root, root_fd)}
            by_key.update((rec.key, rec) for rec in found.values())
            rfd = readyindex.open_dir(self._root, root_fd, create=False)
            chunks = None if rfd is None else readyindex.load_chunks(self._root, root_fd, rfd)
            try:
                if chunks is None:
                    return []  # not built yet (an older store): the next writer builds it
                assert rfd is not None
                indexed = set(chunks.entries())
                problems = []
                for digest, rec in sorted(found.items(), key=lambda item: item[1].key):
                    if rec.status not in LIVE_STATUSES:
                        continue
                    unmet = readyindex.unmet_needs(rec, by_key.get)
                    if not unmet and readyindex.entry_of(rec) not in indexed:
                        problems.append(f"ready index: ready candidate {rec.key!r} is missing")
                    for need in unmet:
                        need_digest = key_digest(need)
                        if need_digest is None:
                            continue
                        if digest not in readyindex.waiters(self._root, rfd, need_digest):
                            problems.append(
                                f"ready index: {rec.key!r} is missing from the waiters of {need!r}"
                            )
                return problems
            finally:
                if rfd is not None:
                    os.close(rfd)

    @store_method
    def rebuild_ready_index(self) -> None:
        """Rebuild the ready/ index from the records (`ledger doctor --fix`)."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is not None:
                self._rebuild_ready(root_fd)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group commit: writes inside are durable together when the outermost batch
        exits (one lock hold, one journal, one sync). Re-entrant. An exception
        leaving the outermost batch discards its writes (nothing is written)."""
        self._check_open()
        with self._mutex:
            if self._batch is not None:  # nested: a savepoint; the outermost batch commits
                outer = self._batch
                mark = (len(outer.undo), len(outer.history))
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
                if self._enter(create=False):
                    batch.owns_lock = True
            self._batch = batch
            try:
                yield
                if batch.records or batch.history:
                    assert self._root_fd is not None
                    with io_errors(self._root):
                        journal.commit(self._root, self._root_fd, batch, self._write_records)
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
                journal.commit(self._root, root_fd, one_call, self._write_records)  # all or none

    @store_method
    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """History entries oldest first, streamed (a torn last line, left by a crash
        or an append in progress, is skipped): `log` prints each as it is read."""
        self._check_open()
        batch = self._batch
        pending = list(batch.history) if batch is not None and batch.mine() else []
        return self._stream_history(key, pending)

    def _stream_history(self, key: str | None, pending: list[bytes]) -> Iterator[HistoryEntry]:
        path = self._shown(HISTORY_NAME)
        with io_errors(self._root):
            fd = None
            root_fd = _fsutil.open_root(self._root)
            if root_fd is not None:
                try:
                    flags = (
                        os.O_RDONLY | _fsutil.O_NOFOLLOW | _fsutil.O_NONBLOCK | _fsutil.O_CLOEXEC
                    )
                    fd = os.open(HISTORY_NAME, flags, dir_fd=root_fd)
                except FileNotFoundError:
                    fd = None
                except OSError as exc:
                    raise _fsutil.open_failed(path, exc) from None
                finally:
                    os.close(root_fd)
            number = 0
            if fd is not None:
                try:
                    _fsutil.require_regular(fd, path)
                    rest = b""
                    while chunk := os.read(fd, 1 << 20):
                        lines = (rest + chunk).split(b"\n")
                        rest = lines.pop()  # an incomplete (maybe torn) line, for now
                        for entry in historyfile.parse_lines(lines, path, number):
                            if key is None or entry.key == key:
                                yield entry
                        number += len(lines)
                finally:
                    os.close(fd)
            for entry in historyfile.parse_lines(
                b"".join(pending).split(b"\n")[:-1], "(pending batch)", 0
            ):
                if key is None or entry.key == key:
                    yield entry

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> JsonFileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonFileStore({self._root!r})"

    # -- under the lock --------------------------------------------------------------

    def _recover(self, root_fd: int) -> None:
        data = _fsutil.read_file(root_fd, JOURNAL_NAME, self._shown(JOURNAL_NAME))
        if data is not None:
            journal.replay(self._root, root_fd, data, self._checksummed, self._write_records)

    def _write_records(
        self,
        records: dict[str, tuple[TaskState, bytes]],
        history: list[bytes],
        history_at: int | None,
    ) -> None:
        root_fd = self._root_fd
        assert root_fd is not None
        self._drop_dirs()  # this may create directories a cached lookup found missing
        apply.write_records(
            self._root,
            root_fd,
            records,
            history,
            history_at,
            lambda digest: self._read_digest(root_fd, digest),
            lambda: self._rebuild_ready(root_fd),
            lambda key, digest: self._read_record(root_fd, key, digest),
        )

    def _rebuild_ready(self, root_fd: int) -> None:
        """Rebuild ready/ from the record files (not the open batch's writes)."""
        found = scan_records(self._root, root_fd, checksummed=self._checksummed, sweep=False)
        pruned = [
            r for r in prunedfile.read_all(self._root, root_fd) if key_digest(r.key) not in found
        ]
        readyindex.rebuild(self._root, root_fd, [*pruned, *found.values()], key_digest)

    def _current(self, root_fd: int, key: str, digest: str) -> TaskState | None:
        """The record as this lock holder sees it (its batch's writes included)."""
        batch = self._batch
        if batch is None:
            return self._read_record(root_fd, key, digest)
        pending = batch.records.get(digest)
        if pending is not None:
            return pending[0]
        if digest in batch.cache:
            return batch.cache[digest]
        rec = self._read_record(root_fd, key, digest)
        batch.cache[digest] = rec
        return rec

    def _read_record(self, root_fd: int, key: str, digest: str) -> TaskState | None:
        rec = self._read_digest(root_fd, digest)
        if rec is None:
            return prunedfile.find(self._root, root_fd, key, digest)
        if rec is not None and rec.key != key:  # unreachable short of a SHA-256 collision
            raise fail(
                self._shown(RECORDS_DIR, digest[:2], digest + ".json"),
                f"holds the record of key {rec.key!r}, not of {key!r}",
            )
        return rec

    def _read_digest(self, root_fd: int, digest: str) -> TaskState | None:
        """The record stored under `digest` (checked to belong there), or None."""
        shard, fname = digest[:2], digest + ".json"
        shown = self._shown(RECORDS_DIR, shard, fname)
        if self._holding() and root_fd == self._root_fd:
            rfd = self._cached_dir(root_fd, RECORDS_DIR, RECORDS_DIR)
            if rfd is None:
                return None
            sfd = self._cached_dir(rfd, shard, f"{RECORDS_DIR}/{shard}")
            if sfd is None:
                return None
            data = _fsutil.read_file(sfd, fname, shown)
        else:
            rfd = _fsutil.open_subdir(root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False)
            if rfd is None:
                return None
            try:
                sfd = _fsutil.open_subdir(rfd, shard, self._shown(RECORDS_DIR, shard), create=False)
                if sfd is None:
                    return None
                try:
                    data = _fsutil.read_file(sfd, fname, shown)
                finally:
                    os.close(sfd)
            finally:
                os.close(rfd)
        if data is None:
            return None
        return decode_record_file(data, shown, checksummed=self._checksummed, digest=digest)
