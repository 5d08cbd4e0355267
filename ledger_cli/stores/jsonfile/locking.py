"""The store lock as the store uses it: re-entrant per thread, created on the
first write, and the recovery done first thing by every new holder (metadata
read, an interrupted batch's journal replayed; temporary files swept on a
process's first hold and every SWEEP_EVERY holds after it); and what
a holder keeps while it holds it, the writes of an open `batch()`
(`PendingBatch`, in memory until the outermost batch commits).

Reads (`load`) take no lock: every record file is replaced atomically, so a
reader sees the old or the new bytes. Writes, `range()` and history reads
take the store lock; the compare of a compare-and-swap happens under it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from typing import TYPE_CHECKING

from ledger_cli.engine import collector
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import depsindex, fsutil, layout, tally, wal
from ledger_cli.stores.jsonfile.fairlock import QueueLock
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.spares import Spares

DEFAULT_LOCK_TIMEOUT = 60.0
SWEEP_EVERY = 64
"""A lock holder sweeps the root's leftover temporary files on its first hold
and on every 64th after it."""

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, ParamSpec, TypeVar

    from ledger_cli.engine.record import TaskState
    from ledger_cli.stores.jsonfile.attemptfiles import Op
    from ledger_cli.stores.jsonfile.keyfiles import SideOp
    from ledger_cli.stores.jsonfile.prunedcount import Held

    _P = ParamSpec("_P")
    _R = TypeVar("_R")


@contextlib.contextmanager
def io_errors(root: str) -> Iterator[None]:
    """An OSError escaping the store's own code is a StoreError naming the store
    (the store fails with StoreError, exit 9, whatever the failed call was)."""
    try:
        yield
    except OSError as exc:
        raise fail(root, "I/O error", exc) from None


def store_method(method: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            raise fail(getattr(args[0], "_root", "(store)"), "I/O error", exc) from None

    return wrapper


class PendingBatch:
    """Writes of an open batch, in memory until the outermost batch commits.

    A nested batch is a savepoint: while one is open, every write logs the
    value it replaced, so an exception leaving the nested block undoes its
    writes only.
    """

    __slots__ = (
        "attempts",
        "cache",
        "files",
        "history",
        "marks",
        "moved",
        "owns_lock",
        "pruned",
        "records",
        "side_undo",
        "sides",
        "thread",
        "undo",
    )

    def __init__(self) -> None:
        self.records: dict[str, tuple[TaskState, bytes]] = {}
        self.history: list[bytes] = []
        self.attempts: list[Op] = []
        """Attempt files written with the batch, in order (attemptfiles.py)."""
        self.sides: dict[tuple[str, str], bytes | None] = {}
        """The side files written with the batch (a key's queue or schedule,
        keyfiles.py), by (directory, key): the file's bytes, None a removal."""
        self.side_undo: list[tuple[tuple[str, str], tuple[bytes | None] | None]] = []
        """While a savepoint is open: each side write's (directory, key) and what
        the batch held for it before ((bytes or None,), None: nothing staged)."""
        self.thread = threading.get_ident()
        self.owns_lock = False
        self.undo: list[tuple[str, tuple[TaskState, bytes] | None]] = []
        self.marks: list[tuple[int, int, int, int]] = []
        self.cache: dict[str, TaskState | None] = {}
        """Records read while the batch holds the lock: nobody else can change them."""
        self.files: dict[str, TaskState | None] = {}
        """What the record files read into `cache` held (None: no file; the
        record came from pruned/ or does not exist)."""
        self.pruned: Held | None = None
        """What the batch read of pruned/ while it holds the lock (`held_pruned`)."""
        self.moved: set[str] | None = None
        """At commit, the records whose tally membership the batch changes
        (tally.noted_moves: only their shard lines are rewritten); None: all."""

    def put(self, digest: str, rec: TaskState, data: bytes) -> None:
        if self.marks:
            self.undo.append((digest, self.records.get(digest)))
        self.records[digest] = (rec, data)

    def held_pruned(self) -> Held:
        # Imported only where a store has a pruned/ directory (docs/design.md §5.1).
        from ledger_cli.stores.jsonfile.prunedcount import Held

        if self.pruned is None:
            self.pruned = Held()
        return self.pruned

    def add_attempt(self, op: Op) -> None:
        self.attempts.append(op)

    def put_side(self, dirname: str, key: str, data: bytes | None) -> None:
        """Stage a side file of `key` (keyfiles.py: `data`, None its removal),
        written with the batch's records at its commit."""
        slot = (dirname, key)
        if self.marks:
            self.side_undo.append((slot, (self.sides[slot],) if slot in self.sides else None))
        self.sides[slot] = data

    def side_ops(self) -> list[SideOp]:
        """The staged side files as the commit writes them (keyfiles.apply_sides)."""
        return [(dirname, key, data) for (dirname, key), data in self.sides.items()]

    def pending(self) -> bool:
        """Whether the batch has anything to commit."""
        return bool(self.records or self.history or self.attempts or self.sides)

    def mark(self) -> tuple[int, int, int, int]:
        """Where a savepoint begins (what `rollback` goes back to)."""
        return len(self.undo), len(self.history), len(self.attempts), len(self.side_undo)

    def rollback(self, mark: tuple[int, int, int, int]) -> None:
        undo_at, history_at, attempts_at, sides_at = mark
        for digest, previous in reversed(self.undo[undo_at:]):
            if previous is None:
                del self.records[digest]
            else:
                self.records[digest] = previous
        for slot, staged in reversed(self.side_undo[sides_at:]):
            if staged is None:
                del self.sides[slot]
            else:
                self.sides[slot] = staged[0]
        del self.undo[undo_at:]
        del self.history[history_at:]
        del self.attempts[attempts_at:]
        del self.side_undo[sides_at:]

    def mine(self) -> bool:
        """True in the thread that opened the batch."""
        return self.thread == threading.get_ident()


class LockedDirectory:
    """The lock, the open root directory while it is held, and what a holder
    may cache meanwhile (directory fds, the fence floor, the open batch)."""

    def __init__(self, root: str, lock_timeout: float, fair_lock: bool) -> None:
        self._root = root
        self._mutex = threading.RLock()
        self._lock = QueueLock(self._root, lock_timeout, fair=fair_lock)
        self._depth = 0
        self._owner = 0
        self._dirs: dict[str, int | None] = {}
        self._root_fd: int | None = None
        self._floor = 0
        self._batch: PendingBatch | None = None
        self._spares = Spares()
        self._meta_seen = False
        self._holds = 0
        self._checksummed = True  # set from the metadata before any record is read
        self._closed = False

    @property
    def fair_lock(self) -> bool:
        """Whether writers waiting for the lock queue in arrival order (then one
        that releases and re-takes it at once goes behind them)."""
        return self._lock.fair

    def _fill_spares(self) -> None:
        """Before taking the lock, when a large commit is likely (one just
        happened): make the files it writes into, and flush what others left
        dirty (durability.py), so neither happens while the lock is held."""
        if self._spares.want and not self._depth:
            from ledger_cli.stores.jsonfile import durability  # after a large commit only

            root_fd = fsutil.open_root(self._root)
            if root_fd is not None:
                try:
                    self._spares.fill(root_fd)
                    durability.flush_before_lock(root_fd, self._root)
                finally:
                    os.close(root_fd)

    def _recover(self, root_fd: int) -> None:
        """Finish what a crashed holder left (the journal); the subclass's part."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"ledger: store: {self._root}: the store is closed")

    def _holding(self) -> bool:
        """True in the thread that holds the store lock."""
        return self._depth > 0 and self._owner == threading.get_ident()

    def _shown(self, *parts: str) -> str:
        return layout.shown(self._root, *parts)

    def _read_meta(self, root_fd: int) -> dict[str, Any] | None:
        meta = layout.read_meta(self._root, root_fd)
        if meta is not None:
            self._checksummed = meta["version"] >= 2
            self._meta_seen = True
        return meta

    def _initialized(self, root_fd: int) -> bool:
        return self._read_meta(root_fd) is not None

    @contextlib.contextmanager
    def _locked(self, *, create: bool) -> Iterator[int | None]:
        """Hold the store lock for the block (re-entrant). Yields the root directory fd,
        or None when the store does not exist and `create` is false."""
        with self._mutex:
            if not self._enter(create=create):
                yield None
                return
            batch = self._batch
            if batch is not None and not batch.owns_lock:
                batch.owns_lock = True  # first write of a batch: hold to its end
                yield self._root_fd
                return
            try:
                yield self._root_fd
            finally:
                self._exit()

    def _enter(self, *, create: bool) -> bool:
        """Take (or re-enter) the store lock; False when the store does not exist
        and `create` is false. The caller holds self._mutex."""
        if self._depth > 0:
            self._depth += 1
            return True
        root_fd = fsutil.open_root(self._root)
        if root_fd is None and create:
            root_fd = layout.open_root_creating(self._root)
        if root_fd is None:
            return False
        try:
            initialized = self._initialized(root_fd)
            if not initialized and create:
                try:
                    layout.refuse_foreign(self._root, root_fd)  # before the lock file goes in
                except StoreError:
                    # A concurrent first opener may have initialized the store between
                    # the two reads (the metadata file appears whole, by rename).
                    initialized = self._initialized(root_fd)
                    if not initialized:
                        raise
        except BaseException:
            os.close(root_fd)
            raise
        if not initialized and not create:  # create nothing in a directory that is no store
            os.close(root_fd)
            return False
        try:
            wal.flush_if_due(self._root, root_fd)  # a checkpoint's syncfs is short then
            self._lock.acquire(root_fd)
        except BaseException:
            os.close(root_fd)
            raise
        collector.pause()  # no collection while the lock is held (engine/collector.py)
        self._root_fd = root_fd
        self._depth = 1
        self._owner = threading.get_ident()
        try:
            # Every temporary file is made in the root directory while the lock is
            # held: any found now was left by a crash. They only take space, so
            # a process that holds the lock again and again (a drain worker)
            # looks once every SWEEP_EVERY holds.
            if self._holds % SWEEP_EVERY == 0:
                layout.sweep_root(self._root, root_fd)
            self._holds += 1
            meta = self._read_meta(root_fd)
            if meta is None:
                meta = layout.initialize(self._root, root_fd)
                depsindex.create_empty(self._root, root_fd)  # no records: complete
                tally.rebuild(self._root, root_fd, [])
            self._floor = int(meta["fence_floor"])
            self._recover(root_fd)
        except BaseException:
            self._exit()
            raise
        return True

    def _exit(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            root_fd, self._root_fd = self._root_fd, None
            self._owner = 0
            try:
                self._drop_dirs()
            finally:
                try:
                    self._lock.release()  # whatever failed before: never keep the lock
                finally:
                    collector.resume()
                    if root_fd is not None:
                        os.close(root_fd)

    def checkpoint(self, root_fd: int) -> None:
        """Before a write that goes around wal.log (prune, a history rewrite,
        doctor's repairs, attempt upkeep): make the log's writes durable and
        empty it, so no frame replayed later undoes that write (wal.py)."""
        wal.checkpoint(self._root, root_fd)

    def _read_root_file(self, name: str, shown: str) -> bytes | None:
        """A file of the store directory, or None: through the held root fd in
        the thread holding the lock, else through one opened for the read."""
        if self._holding() and self._root_fd is not None:
            return fsutil.read_file(self._root_fd, name, shown)
        return fsutil.read_in(fsutil.open_root(self._root), name, shown)

    def _on_root(self, work: Callable[[int], object]) -> None:
        """`work(root_fd)` under the lock; nothing for a store not created yet."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is not None:
                work(root_fd)

    def _write_root_file(self, root_fd: int, name: str, data: bytes | None) -> None:
        """Replace the file `name` of the store directory by `data` (None:
        remove it), durably, name and all. Under the lock."""
        if data is None:
            fsutil.unlink_quiet(root_fd, name)
        else:
            fsutil.replace_file(root_fd, name, data, self._shown(name), sync=True)
        fsutil.fsync_fd(root_fd, self._root)

    def _cached_dir(self, parent_fd: int, name: str, key: str) -> int | None:
        """A directory fd kept open while this thread holds the store lock (closed
        on release; dropped before any write creates directories)."""
        if key in self._dirs:
            return self._dirs[key]
        fd = fsutil.open_subdir(parent_fd, name, self._shown(*key.split("/")), create=False)
        self._dirs[key] = fd
        return fd

    def _drop_dirs(self) -> None:
        dirs, self._dirs = self._dirs, {}
        fsutil.close_all(dirs.values())
