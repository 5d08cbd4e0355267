"""JsonFileStore: the durable, concurrent, embedded default store (SPEC §3.2).

Layout of a store directory (mode 0700; every file 0600):

    ledger-store.json     format marker and version, the fence floor
    ledger.lock           the filelock lock file; never deleted
    queue/                the FIFO queue in front of the lock (see _fairlock)
    records/ab/<sha256 of the UTF-8 key>.json
                          one file per key: the wire record object with a
                          checksum member last, `,"Sum":"<sha256>"}` + "\\n"
    live/<sha256>         the index of pending and claimed records: an empty
    live/ab.idx           marker per record a single write made live, and per
                          shard a list of the records a batch made live. The
                          claimable-work scan (`by_status`) reads these records
                          only, however many finished ones accumulate. The
                          index is a superset (entries are added durably
                          before the record, dropped after it or by the scan).
    history.jsonl         the history of writes, one JSON object a line
    journal.json          only while a batch commits (or after a crash in it)

Reads (`load`) take no lock: every record file is replaced atomically, so a
reader sees the old or the new bytes. Writes, `range()` and history reads
take the store lock; the compare of a compare-and-swap happens under it.

A write outside `batch()` is durable before it returns: the new bytes go to a
temporary file that is fsynced and renamed over the record, then the
directory is fsynced. Inside `batch()` writes stay in memory (later loads in
the batch see them); when the outermost batch exits they are committed
together: the journal (all records and history lines) is written and
fsynced and renamed into place — the commit point — then applied to the
record files, made durable (syncfs(2) for large batches, fsyncs for small
ones), and the journal is removed. A journal found later (a crash during
apply) is replayed first thing under the lock. A batch left by an exception
writes nothing.

The store refuses, never resets: a record file that is not valid UTF-8, not
a JSON record, fails validation or sits under the wrong name, a history line
that is corrupt (except a torn last line, the trace of a crash, which is
ignored), a journal that does not parse, or an unknown format version raise
StoreError naming the file, and nothing is overwritten.

Checksums: a flipped bit inside a string (an owner, a task payload) still
parses as a valid record, so each record file ends with a `"Sum"` member: the
SHA-256 of the record's wire JSON (the file without that member and without
the final newline). Readers ignore unknown members, so the file stays a wire
record for Go and `jq`; the store verifies the sum on every read and refuses a
file whose sum is missing or wrong. Format version 2 requires it; the stores
of version 1 (no sums) are still read, their sums checked where present.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence

from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import DecodeError, StoreError, ValidationError
from ledger_cli.stores import _fsutil
from ledger_cli.stores._fairlock import LOCK_NAME, QUEUE_DIR, QueueLock
from ledger_cli.stores._fsutil import fail
from ledger_cli.stores.history import HistoryEntry

try:  # CPython's built-in SHA-256: importing hashlib would load OpenSSL (~5 ms per start)
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found]  # 3.11
except ImportError:  # pragma: no cover - other Pythons
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # 3.12+
    except ImportError:
        from hashlib import sha256 as _sha256

__all__ = ["FORMAT", "FORMAT_VERSION", "JsonFileStore"]

FORMAT = "ledger_cli.jsonfile"
FORMAT_VERSION = 2
"""Version 2: every record file carries its checksum. Version 1 (without) is read too."""
READABLE_VERSIONS = (1, 2)
JOURNAL_VERSION = 1
META_NAME = "ledger-store.json"
RECORDS_DIR = "records"
LIVE_DIR = "live"
LIVE_STATUSES = frozenset({"pending", "claimed"})
"""Statuses indexed under live/ (the claimable ones; every other status is terminal)."""
HISTORY_NAME = "history.jsonl"
JOURNAL_NAME = "journal.json"
JOURNAL_FORMAT = "ledger_cli.journal"

_MARKER_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _fsutil.O_NOFOLLOW | _fsutil.O_CLOEXEC
DEFAULT_LOCK_TIMEOUT = 60.0
SYNC_EACH_MAX = 16
"""Batches writing more files than this are made durable with one syncfs(2)."""

_RECORD_FILE = re.compile(r"[0-9a-f]{64}\.json")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_SHARD_INDEX = re.compile(r"[0-9a-f]{2}\.idx")
_SHARD = re.compile(r"[0-9a-f]{2}")


def key_digest(key: str) -> str | None:
    """The file-name digest of a key; None for a key that is not valid Unicode
    (a lone surrogate), which no JSON file can hold."""
    try:
        raw = key.encode("utf-8")
    except UnicodeEncodeError:
        return None
    digest: str = _sha256(raw).hexdigest()
    return digest


TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Any, ParamSpec, TypeVar

    _P = ParamSpec("_P")
    _R = TypeVar("_R")


@contextlib.contextmanager
def _io_errors(root: str) -> Iterator[None]:
    """An OSError escaping the store's own code is a StoreError naming the store
    (the store fails with StoreError, exit 9, whatever the failed call was)."""
    try:
        yield
    except OSError as exc:
        raise fail(root, "I/O error", exc) from None


def _store_method(method: Callable[_P, _R]) -> Callable[_P, _R]:
    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            raise fail(getattr(args[0], "_root", "(store)"), "I/O error", exc) from None

    return wrapper


class _Batch:
    """Writes of an open batch, in memory until the outermost batch commits.

    A nested batch is a savepoint: while one is open, every write logs the
    value it replaced, so an exception leaving the nested block undoes its
    writes only.
    """

    __slots__ = ("cache", "history", "marks", "owns_lock", "records", "thread", "undo")

    def __init__(self) -> None:
        self.records: dict[str, tuple[TaskState, bytes]] = {}
        self.history: list[bytes] = []
        self.thread = _thread.get_ident()
        self.owns_lock = False
        self.undo: list[tuple[str, tuple[TaskState, bytes] | None]] = []
        self.marks: list[tuple[int, int]] = []
        self.cache: dict[str, TaskState | None] = {}
        """Records read while the batch holds the lock: nobody else can change them."""

    def put(self, digest: str, rec: TaskState, data: bytes) -> None:
        if self.marks:
            self.undo.append((digest, self.records.get(digest)))
        self.records[digest] = (rec, data)

    def rollback(self, mark: tuple[int, int]) -> None:
        undo_at, history_at = mark
        for digest, previous in reversed(self.undo[undo_at:]):
            if previous is None:
                del self.records[digest]
            else:
                self.records[digest] = previous
        del self.undo[undo_at:]
        del self.history[history_at:]


class JsonFileStore:
    """A directory of JSON records; safe under many concurrent processes.

    `lock_timeout` bounds the wait for the store lock (StoreError after it).
    `fair_lock=False` drops the FIFO queue in front of filelock (benchmarks).
    A directory on a network file system (NFS, SMB, 9p, FUSE…) is refused —
    advisory locks there do not exclude other hosts — unless `allow_network_fs`
    (default: the environment variable LEDGER_ALLOW_NETWORK_FS=1) says so.
    """

    @_store_method
    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        fair_lock: bool = True,
        allow_network_fs: bool | None = None,
    ) -> None:
        self._root = os.path.abspath(os.fspath(path))
        if allow_network_fs is None:
            allow_network_fs = os.environ.get(_fsutil.ENV_ALLOW_NETWORK_FS) == "1"
        if not allow_network_fs:
            _refuse_network_fs(self._root)
        self._mutex = _thread.RLock()
        self._lock = QueueLock(self._root, lock_timeout, fair=fair_lock)
        self._depth = 0
        self._owner = 0
        self._dirs: dict[str, int | None] = {}
        self._root_fd: int | None = None
        self._floor = 0
        self._batch: _Batch | None = None
        self._meta_seen = False
        self._checksummed = True  # set from the metadata before any record is read
        self._closed = False
        # Refuse early (unknown version, records without metadata) and finish a
        # batch that a crash interrupted, before anyone reads.
        root_fd = _fsutil.open_root(self._root)
        if root_fd is not None:
            try:
                if self._read_meta(root_fd) is not None and self._exists(root_fd, JOURNAL_NAME):
                    with self._locked(create=False):
                        pass  # acquiring the lock replays the journal
            finally:
                os.close(root_fd)

    # -- public API ------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._root

    @property
    @_store_method
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

    @_store_method
    def check_record_file(self, data: bytes, shown: str, digest: str) -> TaskState:
        """Decode a record file's bytes as the store reads them (`ledger doctor`):
        checksum, wire record, validation, and the file name (`digest`) of its key."""
        return decode_record_file(data, shown, checksummed=self._checksummed, digest=digest)

    @_store_method
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

    @_store_method
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
            data = _encode(new)
            batch = self._batch
            if batch is not None:
                batch.put(digest, new, data)
            else:
                self._write_records(root_fd, {digest: (new, data)}, [], None)
            return True

    @_store_method
    def range(self) -> Iterator[TaskState]:
        """Every record, sorted by key (UTF-8 byte order), read under the lock."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return iter(())
            found = self._scan_records(root_fd, sweep=True)
            self._sweep_root(root_fd)
            self._lock.sweep(root_fd)
            batch = self._batch
            if batch is not None and batch.thread == _thread.get_ident():
                for digest, (rec, _) in batch.records.items():
                    found[digest] = rec
        return iter(sorted(found.values(), key=lambda rec: byte_order(rec.key)))

    @_store_method
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
            records: Iterable[TaskState] = (r for r in self.range() if r.status in wanted)
        else:
            with self._locked(create=False) as root_fd:
                if root_fd is None:
                    return []
                found = self._scan_live(root_fd)
                batch = self._batch
                if batch is not None and batch.thread == _thread.get_ident():
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
            batch = _Batch()
            # Lock now if the store exists; otherwise the first write inside the
            # batch creates it and takes the lock (reads alone create nothing).
            with _io_errors(self._root):
                if self._enter(create=False):
                    batch.owns_lock = True
            self._batch = batch
            try:
                yield
                if batch.records or batch.history:
                    assert self._root_fd is not None
                    with _io_errors(self._root):
                        self._commit(self._root_fd, batch)
            finally:
                self._batch = None
                if batch.owns_lock:
                    with _io_errors(self._root):
                        self._exit()

    @_store_method
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
                one_call = _Batch()
                one_call.history = lines
                self._commit(root_fd, one_call)  # all lines or none

    @_store_method
    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """History entries oldest first (a torn last line, left by a crash, is skipped)."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return iter(())
            data = _fsutil.read_file(root_fd, HISTORY_NAME, self._shown(HISTORY_NAME)) or b""
            pending: list[bytes] = []
            batch = self._batch
            if batch is not None and batch.thread == _thread.get_ident():
                pending = batch.history
        entries = _parse_history(data, self._shown(HISTORY_NAME))
        entries.extend(_parse_history(b"".join(pending), "(pending batch)"))
        return iter([e for e in entries if key is None or e.key == key])

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> JsonFileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonFileStore({self._root!r})"

    # -- locking ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"ledger: store: {self._root}: the store is closed")

    def _holding(self) -> bool:
        """True in the thread that holds the store lock."""
        return self._depth > 0 and self._owner == _thread.get_ident()

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
        root_fd = self._open_root(create)
        if root_fd is None:
            return False
        try:
            initialized = self._initialized(root_fd)
            if not initialized and create:
                self._refuse_foreign(root_fd)  # before the lock file goes in
        except BaseException:
            os.close(root_fd)
            raise
        if not initialized and not create:  # create nothing in a directory that is no store
            os.close(root_fd)
            return False
        try:
            self._lock.acquire(root_fd)
        except BaseException:
            os.close(root_fd)
            raise
        self._root_fd = root_fd
        self._depth = 1
        self._owner = _thread.get_ident()
        try:
            # Every temporary file is made in the root directory while the lock is
            # held: any found now was left by a crash (cheap: the root holds ~8 names).
            self._sweep_root(root_fd)
            meta = self._read_meta(root_fd)
            if meta is None:
                meta = self._initialize(root_fd)
            self._floor = int(meta["fence_floor"])
            journal = _fsutil.read_file(root_fd, JOURNAL_NAME, self._shown(JOURNAL_NAME))
            if journal is not None:
                self._replay_journal(root_fd, journal)
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
                    if root_fd is not None:
                        os.close(root_fd)

    def _open_root(self, create: bool) -> int | None:
        root_fd = _fsutil.open_root(self._root)
        if root_fd is not None or not create:
            return root_fd
        parent = os.path.dirname(self._root)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise fail(parent, "cannot create the parent directory", exc) from None
        try:
            os.mkdir(self._root, _fsutil.DIR_MODE)
        except FileExistsError:
            pass
        except OSError as exc:
            raise fail(self._root, "cannot create the store directory", exc) from None
        root_fd = _fsutil.open_root(self._root)
        if root_fd is None:
            raise fail(self._root, "the store directory vanished while being created")
        try:
            parent_fd = os.open(parent, os.O_RDONLY)
            try:
                os.fsync(parent_fd)
            finally:
                os.close(parent_fd)
        except OSError as exc:
            os.close(root_fd)
            raise fail(parent, "fsync failed", exc) from None
        return root_fd

    # -- metadata ------------------------------------------------------------------------

    def _shown(self, *parts: str) -> str:
        return os.path.join(self._root, *parts)

    def _exists(self, dir_fd: int, name: str) -> bool:
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise fail(self._shown(name), "cannot stat", exc) from None
        return True

    def _read_meta(self, root_fd: int) -> dict[str, Any] | None:
        shown = self._shown(META_NAME)
        data = _fsutil.read_file(root_fd, META_NAME, shown)
        if data is None:
            if self._exists(root_fd, RECORDS_DIR):
                raise fail(
                    shown,
                    "missing, but the directory holds records; refusing to guess their "
                    "format (restore the file from a backup)",
                )
            return None
        try:
            meta = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise fail(shown, "corrupt store metadata (not a JSON object)") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise fail(shown, f"not a ledger_cli JSON store metadata file (format {FORMAT!r})")
        version = meta.get("version")
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise fail(
                shown,
                f"unknown store format version {version!r} (this ledger_cli reads versions "
                f"{' and '.join(map(str, READABLE_VERSIONS))}); use the ledger_cli release "
                "that wrote it",
            )
        floor = meta.get("fence_floor", 0)
        if type(floor) is not int or floor < 0:
            raise fail(shown, f"bad fence_floor {floor!r}")
        meta["fence_floor"] = floor
        self._checksummed = version >= 2
        self._meta_seen = True
        return meta

    def _initialized(self, root_fd: int) -> bool:
        return self._read_meta(root_fd) is not None

    def _refuse_foreign(self, root_fd: int) -> None:
        """StoreError unless the directory is empty (but for our lock files and temps)."""
        try:
            names = os.listdir(root_fd)
        except OSError as exc:
            raise fail(self._root, "cannot list", exc) from None
        foreign = [
            n
            for n in names
            if n not in (LOCK_NAME, QUEUE_DIR) and not n.endswith(_fsutil.TEMP_SUFFIX)
        ]
        if foreign:
            raise fail(
                self._root,
                f"is not empty and is not a ledger store (it holds {sorted(foreign)[0]!r}); "
                "choose an empty or new directory",
            )

    def _initialize(self, root_fd: int) -> dict[str, Any]:
        """Write the metadata file into an empty directory (under the lock)."""
        shown = self._shown()
        self._refuse_foreign(root_fd)
        meta: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "fence_floor": 0,
        }
        data = (json.dumps(meta) + "\n").encode("utf-8")
        try:
            os.fchmod(root_fd, _fsutil.DIR_MODE)
        except OSError as exc:
            raise fail(shown, "cannot set mode 0700", exc) from None
        _fsutil.replace_file(root_fd, META_NAME, data, self._shown(META_NAME), sync=True)
        _fsutil.fsync_fd(root_fd, shown)
        return meta

    # -- records ---------------------------------------------------------------------------

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
        if rec is not None and rec.key != key:  # unreachable short of a SHA-256 collision
            raise fail(
                self._shown(RECORDS_DIR, digest[:2], digest + ".json"),
                f"holds the record of key {rec.key!r}, not of {key!r}",
            )
        return rec

    def _scan_records(self, root_fd: int, *, sweep: bool) -> dict[str, TaskState]:
        found: dict[str, TaskState] = {}
        rfd = _fsutil.open_subdir(root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=False)
        if rfd is None:
            return found
        try:
            for shard in sorted(os.listdir(rfd)):
                if not _SHARD.fullmatch(shard):
                    if sweep and shard.endswith(_fsutil.TEMP_SUFFIX):
                        _fsutil.unlink_quiet(rfd, shard)
                    continue
                sfd = _fsutil.open_subdir(rfd, shard, self._shown(RECORDS_DIR, shard), create=False)
                if sfd is None:
                    continue
                try:
                    for fname in os.listdir(sfd):
                        if fname.endswith(_fsutil.TEMP_SUFFIX):
                            if sweep:  # under the lock: its writer is gone
                                _fsutil.unlink_quiet(sfd, fname)
                            continue
                        if not _RECORD_FILE.fullmatch(fname):
                            continue
                        shown = self._shown(RECORDS_DIR, shard, fname)
                        data = _fsutil.read_file(sfd, fname, shown)
                        if data is None:
                            continue
                        digest = fname[:-5]
                        found[digest] = decode_record_file(
                            data, shown, checksummed=self._checksummed, digest=digest
                        )
                finally:
                    os.close(sfd)
        except OSError as exc:
            raise fail(self._shown(RECORDS_DIR), "cannot list", exc) from None
        finally:
            os.close(rfd)
        return found

    def _scan_live(self, root_fd: int) -> dict[str, TaskState]:
        """The records the live/ index names that are live; stale entries (a record
        that went terminal, or never got written: a crash) are dropped. Under the lock."""
        found: dict[str, TaskState] = {}
        lfd = _fsutil.open_subdir(root_fd, LIVE_DIR, self._shown(LIVE_DIR), create=False)
        if lfd is None:
            return found
        try:
            markers: list[str] = []
            indexed: dict[str, set[str]] = {}
            for name in os.listdir(lfd):
                if _DIGEST.fullmatch(name):
                    markers.append(name)
                elif _SHARD_INDEX.fullmatch(name):
                    indexed[name[:2]] = self._read_shard_index(lfd, name[:2])
                elif name.endswith(_fsutil.TEMP_SUFFIX):
                    _fsutil.unlink_quiet(lfd, name)
            verdict: dict[str, bool] = {}
            for digest in [*markers, *(d for ds in indexed.values() for d in ds)]:
                if digest not in verdict:
                    rec = self._read_digest(root_fd, digest)
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
                    self._write_shard_index(root_fd, lfd, shard, keep)
        except OSError as exc:
            raise fail(self._shown(LIVE_DIR), "cannot list", exc) from None
        finally:
            os.close(lfd)
        return found

    def _read_shard_index(self, lfd: int, shard: str) -> set[str]:
        name = shard + ".idx"
        data = _fsutil.read_file(lfd, name, self._shown(LIVE_DIR, name))
        if data is None:
            return set()
        digests = set(data.decode("ascii", "replace").split())
        bad = next((d for d in digests if not _DIGEST.fullmatch(d) or d[:2] != shard), None)
        if bad is not None:
            raise fail(self._shown(LIVE_DIR, name), f"corrupt index entry {bad[:70]!r}")
        return digests

    def _write_shard_index(self, root_fd: int, lfd: int, shard: str, digests: set[str]) -> None:
        """Replace a shard's index file (not fsynced: the caller syncs, or it is a removal)."""
        name = shard + ".idx"
        if not digests:
            _fsutil.unlink_quiet(lfd, name)
            return
        data = "".join(d + "\n" for d in sorted(digests)).encode("ascii")
        _fsutil.replace_file(
            lfd, name, data, self._shown(LIVE_DIR, name), sync=False, tmp_dir_fd=root_fd
        )

    def _cached_dir(self, parent_fd: int, name: str, key: str) -> int | None:
        """A directory fd kept open while this thread holds the store lock (closed
        on release; dropped before any write creates directories)."""
        if key in self._dirs:
            return self._dirs[key]
        fd = _fsutil.open_subdir(parent_fd, name, self._shown(*key.split("/")), create=False)
        self._dirs[key] = fd
        return fd

    def _drop_dirs(self) -> None:
        dirs, self._dirs = self._dirs, {}
        _fsutil.close_all(dirs.values())

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

    def _sweep_root(self, root_fd: int) -> None:
        try:
            for name in os.listdir(root_fd):
                if name.endswith(_fsutil.TEMP_SUFFIX):
                    _fsutil.unlink_quiet(root_fd, name)
        except OSError as exc:
            raise fail(self._root, "cannot sweep temporary files", exc) from None

    # -- writing -------------------------------------------------------------------------------

    def _history_fd(self, root_fd: int) -> tuple[int, int]:
        """Open history.jsonl for appending; cut a torn last line (a crash's). (fd, size)."""
        shown = self._shown(HISTORY_NAME)
        flags = os.O_RDWR | os.O_CREAT | _fsutil.O_NOFOLLOW | _fsutil.O_NONBLOCK | _fsutil.O_CLOEXEC
        try:
            fd = os.open(HISTORY_NAME, flags, _fsutil.FILE_MODE, dir_fd=root_fd)
        except OSError as exc:
            raise _fsutil.open_failed(shown, exc) from None
        size = _fsutil.require_regular(fd, shown).st_size
        try:
            if size == 0:
                os.fchmod(fd, _fsutil.FILE_MODE)
            elif os.pread(fd, 1, size - 1) != b"\n":
                keep = _last_newline(fd, size)
                os.ftruncate(fd, keep)
                os.fsync(fd)
                size = keep
        except OSError as exc:
            os.close(fd)
            raise fail(shown, "cannot prepare for appending", exc) from None
        return fd, size

    def _write_records(
        self,
        root_fd: int,
        records: dict[str, tuple[TaskState, bytes]],
        history: list[bytes],
        history_at: int | None,
    ) -> None:
        """Write records, their live/ markers and history lines; durable on return.

        Markers of records that become pending/claimed are created (and made
        durable) before the records are written, markers of the others removed
        after: the markers are always a superset of the live records.
        `history_at`: the size history.jsonl must have before the lines go in
        (a journal replay cuts what a crashed apply appended); None = the end.
        """
        self._drop_dirs()  # this may create directories a cached lookup found missing
        use_syncfs = len(records) + (1 if history else 0) > SYNC_EACH_MAX
        if use_syncfs and not _fsutil.sync_filesystem_available():
            use_syncfs = False
        rfd = lfd = None
        shard_fds: dict[str, int] = {}
        try:
            if records:
                sync = not use_syncfs
                rfd = _fsutil.open_subdir(
                    root_fd, RECORDS_DIR, self._shown(RECORDS_DIR), create=True, sync=sync
                )
                lfd = _fsutil.open_subdir(
                    root_fd, LIVE_DIR, self._shown(LIVE_DIR), create=True, sync=sync
                )
                assert rfd is not None and lfd is not None
                if use_syncfs:
                    # Many records: one index file per shard rather than a marker
                    # each (the syncfs below makes them durable with the records;
                    # the journal covers a crash in between).
                    self._index_batch(root_fd, lfd, records)
                else:
                    created = False
                    for digest, (rec, _) in records.items():
                        if rec.status in LIVE_STATUSES:
                            created |= self._mark_live(lfd, digest)
                    if created:
                        _fsutil.fsync_fd(lfd, self._shown(LIVE_DIR))
                for digest in records:
                    shard = digest[:2]
                    if shard not in shard_fds:
                        sfd = _fsutil.open_subdir(
                            rfd, shard, self._shown(RECORDS_DIR, shard), create=True, sync=sync
                        )
                        assert sfd is not None
                        shard_fds[shard] = sfd
                items = [(shard_fds[d[:2]], d, data) for d, (_, data) in records.items()]
                self._replace_all(root_fd, items, sync)
            if history:
                self._append_history_lines(root_fd, history, history_at, sync=not use_syncfs)
            if use_syncfs:
                _fsutil.sync_filesystem(root_fd, self._root)
            else:
                for shard, sfd in shard_fds.items():
                    _fsutil.fsync_fd(sfd, self._shown(RECORDS_DIR, shard))
            if lfd is not None:
                for digest, (rec, _) in records.items():
                    if rec.status not in LIVE_STATUSES:
                        _fsutil.unlink_quiet(lfd, digest)  # a leftover is harmless
        finally:
            _fsutil.close_all([*shard_fds.values(), rfd, lfd])

    def _replace_all(self, root_fd: int, items: list[tuple[int, str, bytes]], sync: bool) -> None:
        for sfd, digest, data in items:
            fname = digest + ".json"
            shown = self._shown(RECORDS_DIR, digest[:2], fname)
            _fsutil.replace_file(sfd, fname, data, shown, sync=sync, tmp_dir_fd=root_fd)

    def _index_batch(
        self, root_fd: int, lfd: int, records: dict[str, tuple[TaskState, bytes]]
    ) -> None:
        by_shard: dict[str, tuple[set[str], set[str]]] = {}
        for digest, (rec, _) in records.items():
            adds, drops = by_shard.setdefault(digest[:2], (set(), set()))
            (adds if rec.status in LIVE_STATUSES else drops).add(digest)
        for shard, (adds, drops) in by_shard.items():
            if not adds:
                continue  # stale entries of dropped records: removed by the scan
            current = self._read_shard_index(lfd, shard)
            wanted = (current | adds) - drops
            if wanted != current:
                self._write_shard_index(root_fd, lfd, shard, wanted)

    def _mark_live(self, lfd: int, digest: str) -> bool:
        """Create the live/ marker of `digest`; True if it was not there yet."""
        try:
            fd = os.open(digest, _MARKER_FLAGS, _fsutil.FILE_MODE, dir_fd=lfd)
        except FileExistsError:
            return False
        except OSError as exc:
            raise fail(self._shown(LIVE_DIR, digest), "cannot create", exc) from None
        try:
            os.fchmod(fd, _fsutil.FILE_MODE)
        finally:
            os.close(fd)
        return True

    def _append_history_lines(
        self, root_fd: int, lines: list[bytes], at: int | None, *, sync: bool
    ) -> None:
        shown = self._shown(HISTORY_NAME)
        fd, size = self._history_fd(root_fd)
        try:
            if at is not None:
                if size < at:
                    raise fail(
                        shown,
                        f"is shorter ({size} bytes) than the journal expects ({at}); "
                        "refusing to replay",
                    )
                if size > at:
                    os.ftruncate(fd, at)
                size = at
            os.lseek(fd, size, os.SEEK_SET)
            _fsutil.write_all(fd, b"".join(lines))
            if sync:
                os.fsync(fd)
        except OSError as exc:
            raise fail(shown, "cannot append", exc) from None
        finally:
            os.close(fd)

    def _commit(self, root_fd: int, batch: _Batch) -> None:
        records = batch.records
        if len(records) + len(batch.history) <= 1:
            # One file: atomic by itself (a torn history append is cut on the next one).
            self._write_records(root_fd, records, batch.history, None)
            return
        history_at = None
        if batch.history:
            fd, history_at = self._history_fd(root_fd)  # also cuts a torn tail, durably
            os.close(fd)
        header = {
            "format": JOURNAL_FORMAT,
            "version": JOURNAL_VERSION,
            "records": len(records),
            "history": len(batch.history),
            "history_at": history_at,
        }
        journal = b"".join(
            [
                (json.dumps(header) + "\n").encode("utf-8"),
                *(data for _, data in records.values()),
                *batch.history,
            ]
        )
        shown = self._shown(JOURNAL_NAME)
        _fsutil.replace_file(root_fd, JOURNAL_NAME, journal, shown, sync=True)
        _fsutil.fsync_fd(root_fd, self._root)  # the commit point
        self._write_records(root_fd, records, batch.history, history_at)
        _fsutil.unlink_quiet(root_fd, JOURNAL_NAME)
        _fsutil.fsync_fd(root_fd, self._root)

    def _replay_journal(self, root_fd: int, journal: bytes) -> None:
        """Finish a batch that a crash interrupted after its commit point."""
        shown = self._shown(JOURNAL_NAME)
        lines = journal.split(b"\n")
        if lines[-1] != b"":
            raise fail(shown, "corrupt journal (no final newline); refusing to replay")
        lines.pop()
        try:
            header = json.loads(lines[0].decode("utf-8"))
            n_records, n_history = header["records"], header["history"]
            history_at = header["history_at"]
            ok = (
                header["format"] == JOURNAL_FORMAT
                and header["version"] == JOURNAL_VERSION
                and type(n_records) is int
                and type(n_history) is int
                and len(lines) == 1 + n_records + n_history
                and (history_at is None or type(history_at) is int)
            )
        except (IndexError, KeyError, TypeError, UnicodeDecodeError, ValueError):
            ok = False
        if not ok:
            raise fail(shown, "corrupt journal header; refusing to replay")
        records: dict[str, tuple[TaskState, bytes]] = {}
        for line in lines[1 : 1 + n_records]:
            rec = decode_record_file(line + b"\n", shown, checksummed=self._checksummed)
            digest = key_digest(rec.key)
            assert digest is not None
            records[digest] = (rec, line + b"\n")
        history = [line + b"\n" for line in lines[1 + n_records :]]
        _parse_history(b"".join(history), shown)  # refuse a corrupt journal before writing
        self._write_records(root_fd, records, history, history_at)
        _fsutil.unlink_quiet(root_fd, JOURNAL_NAME)
        _fsutil.fsync_fd(root_fd, self._root)


def _refuse_network_fs(root: str) -> None:
    found = _fsutil.network_filesystem(root)
    if found is not None:
        fstype, mount = found
        raise fail(
            root,
            f"is on a network file system ({fstype} mounted at {mount}); its file locks do "
            "not exclude processes on other hosts, so two hosts could both be granted a "
            "lease or lose an update. Use a local directory (or PostgreSQL for several "
            f"hosts), or set {_fsutil.ENV_ALLOW_NETWORK_FS}=1 if only this host uses the store",
        )


_SUM_HEAD = b',"Sum":"'
_SUM_TAIL = b'"}\n'
_SUM_LEN = len(_SUM_HEAD) + 64 + len(_SUM_TAIL)


def _encode(rec: TaskState) -> bytes:
    """The record file: the wire record with `,"Sum":"<sha256 of the wire record>"` last."""
    from ledger_cli.engine.wire import record_to_json

    body = record_to_json(rec).encode("utf-8")
    return b"".join((body[:-1], _SUM_HEAD, _sha256(body).hexdigest().encode(), _SUM_TAIL))


def decode_record_file(
    data: bytes, shown: str, *, checksummed: bool, digest: str | None = None
) -> TaskState:
    """A record file's record: checksum verified (required when `checksummed`),
    decoded, validated, and (given the file's `digest` name) filed under its key.
    StoreError naming `shown` otherwise."""
    summed: bool | None = None  # None: no checksum member
    tail = len(data) - _SUM_LEN
    if tail > 0 and data[tail : tail + len(_SUM_HEAD)] == _SUM_HEAD and data.endswith(_SUM_TAIL):
        body = data[:tail] + b"}"
        summed = _sha256(body).hexdigest().encode() == data[tail + len(_SUM_HEAD) : -len(_SUM_TAIL)]
        data = body
    rec = _decode(data, shown)  # a decoding error says more than a bad checksum
    if summed is False:
        raise fail(shown, "corrupt record: checksum mismatch (the file was damaged or edited)")
    if summed is None and checksummed:
        raise fail(shown, "corrupt record: its checksum is missing (the file is damaged)")
    if digest is not None and key_digest(rec.key) != digest:
        raise fail(shown, f"holds key {rec.key!r}, which belongs elsewhere")
    return rec


def _decode(data: bytes, shown: str) -> TaskState:
    from ledger_cli.engine.wire import record_from_json

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(shown, "corrupt record: not valid UTF-8") from None
    try:
        rec = record_from_json(text)
    except DecodeError as exc:
        raise fail(shown, f"corrupt record: {exc}") from None
    try:
        rec.validate()
    except ValidationError as exc:
        raise fail(shown, f"invalid record: {exc}") from None
    return rec


def _last_newline(fd: int, size: int) -> int:
    """The offset just past the last b"\\n" before `size` (0 when there is none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


def _parse_history(data: bytes, shown: str) -> list[HistoryEntry]:
    lines = data.split(b"\n")
    lines.pop()  # b"" after a final newline; else a line torn by a crash: ignored
    out: list[HistoryEntry] = []
    for number, line in enumerate(lines, 1):
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                raise TypeError
            out.append(HistoryEntry.from_obj(obj))
        except (KeyError, TypeError, UnicodeDecodeError, ValueError):
            raise fail(shown, f"line {number}: corrupt history entry") from None
    return out
