"""The SQLite store's connection: opening, errors, text recovery, transactions.

`SQLiteConnection` is the base of `SQLiteStore` (sqlite.py) and of its method
groups (claims.py, reads.py, sidetables.py): it opens the
file (autocommit, one connection guarded by a lock), sets the pragmas (WAL,
`synchronous=FULL`, waiting out a concurrent first opener's switch to WAL),
migrates the schema when it is incomplete (sqlite_schema.py), maps driver
errors to StoreError / StoreUnavailableError, runs a statement again after a
text failure (lossless decoding, raw binding: `_retry`), and owns the batch
transaction (BEGIN IMMEDIATE … COMMIT, nested savepoints) that `batch()`
(dialect.py) runs, and the deferred read transaction of its `snapshot()`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ledger_cli.errors import StoreError, StoreUnavailableError
from ledger_cli.stores import sqlite_uri
from ledger_cli.stores.sql import codec, sqlite_schema
from ledger_cli.stores.sql.dialect import SqlDialect

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState

DRIVER_ERRORS = (sqlite3.Error, UnicodeError, OverflowError)
_UNDECODABLE = "could not decode to utf-8"


class SQLiteConnection(SqlDialect):
    """The connection, error mapping and batches of an `SQLiteStore`."""

    NAME = "sqlite"
    NUMBER_MAX = codec.INT64_MAX
    """The largest sequence or fence an INTEGER column holds (engine/leases.py `number_max`)."""
    _driver_errors = DRIVER_ERRORS
    _conn: sqlite3.Connection

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0, create: bool = True
    ) -> None:
        """`create` False (a command that only reads): a file that is not there
        is a NoStoreError, never a new database, even when it is deleted
        between the caller's check and this open (SQLite's `mode=rw`)."""
        self._path = self._where = os.fspath(path)
        self._busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._depth = 0
        self._closed = False
        self._seen: dict[str, TaskState] | None = None
        """The records this write transaction has read, by key (`load`): BEGIN
        IMMEDIATE keeps every other writer out, so a row changes only by this
        connection's compare-and-swap, which starts the dict afresh, as does a
        rollback. None outside a transaction."""
        try:
            self._conn = sqlite3.connect(
                self._path if create else sqlite_uri(self._path, "rw"),
                timeout=busy_timeout,
                isolation_level=None,  # autocommit: transactions are explicit
                check_same_thread=False,
                cached_statements=64,
                uri=not create,
            )
        except sqlite3.Error as exc:
            if not create and not os.path.exists(self._path):
                from ledger_cli.errors import NoStoreError

                raise NoStoreError(
                    f"ledger: no store at {self._path} (the first write creates it)"
                ) from None
            from ledger_cli.stores.otherkind import other_kind  # an error path only

            raise other_kind(self._path, "sqlite") or self._error("open", exc) from None
        self._cur = self._conn.cursor()  # reused by the hot paths (load, CAS)
        self._set_up()

    @property
    def path(self) -> str:
        return self._path

    # -- set-up ------------------------------------------------------------------

    def _setup(self) -> None:
        # Concurrent first openers of a new file race to switch it to WAL, and
        # SQLite answers the losers SQLITE_BUSY at once, without its busy
        # handler: wait for the winner here, up to the same busy timeout.
        deadline = time.monotonic() + self._busy_timeout
        backoff = 0.005
        while True:
            try:
                self._pragmas()
                break
            except DRIVER_ERRORS as exc:
                locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                if not locked or time.monotonic() + backoff > deadline:
                    raise self._error("pragma", exc) from None
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.1)
        with self._errors("size check"):
            self._check_size()
        with self._errors("create ledger_tasks table"):
            if not sqlite_schema.schema_complete(self._conn):
                sqlite_schema.migrate(self._conn, self._path)

    def _check_size(self) -> None:
        """A file shorter than the pages its header counts was truncated: SQLite
        reads the missing pages as zeros, and a query through them can find no
        rows instead of failing (docs/design.md §5.5). Checked inside a read transaction
        while the write-ahead log is empty (then the header's count is the
        file's: a checkpoint cannot reset a log a reader uses); with frames in
        the log, its pages may be the missing ones and SQLite is trusted."""
        from ledger_cli.errors import StoreDamageError

        conn = self._conn
        conn.execute("BEGIN")
        try:
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            size = int(conn.execute("PRAGMA page_size").fetchone()[0])
            try:
                if os.stat(self._path + "-wal").st_size > 0:
                    return
            except FileNotFoundError:
                pass
            try:
                have = os.stat(self._path).st_size
            except FileNotFoundError:
                return
        finally:
            conn.execute("COMMIT")
        if have < pages * size:
            raise StoreDamageError(
                f"ledger: sqlite store {self._path}: the file holds {have} bytes, its header "
                f"counts {pages} pages of {size} bytes: it was truncated; restore it from a backup"
            )

    def _pragmas(self) -> None:
        conn = self._conn
        ms = int(self._busy_timeout * 1000)
        # The order and settings of the Go store, except synchronous (see module doc).
        conn.execute(f"PRAGMA busy_timeout={ms}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() not in ("wal", "memory"):
            raise StoreError(
                f"ledger: sqlite store {self._path}: cannot switch to WAL mode "
                f"(journal_mode is {mode}); check that the file and its directory are writable"
            )
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        self._utf8 = str(conn.execute("PRAGMA encoding").fetchone()[0]).upper() == "UTF-8"

    def quick_check(self, most: int) -> list[str]:
        """SQLite's own check of the file's pages (`PRAGMA quick_check`): each
        problem line it returns (at most `most`), none when the file is whole.
        It reads every page once and checks the b-trees' structure (the index
        pages a query may never touch: `ledger doctor`), not each index entry
        against its row (`integrity_check`, far slower). A page so damaged
        that the check itself fails is one line too, the driver's message."""
        with self._lock:
            self._check_open()
            try:
                rows = self._conn.execute(f"PRAGMA quick_check({int(most)})").fetchall()
            except sqlite3.Error as exc:
                return [codec.one_line(exc)]
        lines = [line for row in rows for line in str(row[0]).splitlines()]
        return [line for line in lines if line not in ("ok", "*** in database main ***")]

    def blob_keys(self, most: int) -> list[bytes]:
        """The keys of rows (at most `most`) stored as a BLOB, not TEXT: a
        program bound bytes (an older release's `Ledger.admit(…, b"job", …)`).
        No command names such a row (`key = ?` compares text with text), and
        an admission of the same text writes a second one. One pass over the
        table, as `doctor` reads every row anyway."""
        with self._lock:
            self._check_open()
            rows = self._fetchall(
                "check keys",
                "SELECT key FROM ledger_tasks WHERE typeof(key) = 'blob' LIMIT ?",
                (int(most),),
            )
        return [bytes(row[0]) for row in rows]

    # -- errors ------------------------------------------------------------------

    def _error(self, op: str, exc: BaseException) -> StoreError:
        text = codec.one_line(exc)
        low = text.lower()
        if isinstance(exc, UnicodeError):
            hint = "keys and text must be valid Unicode (no lone surrogates)"
        elif "locked" in low or "busy" in low:
            hint = (
                f"another process held the write lock for more than {self._busy_timeout:g}s; retry"
            )
        elif "unable to open" in low:
            hint = "check that the directory exists and is writable"
        elif "malformed" in low or "not a database" in low or "corrupt" in low:
            hint = "the file is damaged or not an SQLite database; restore it from a backup"
        elif "readonly" in low or "read-only" in low:
            hint = "the database (or its directory, for the WAL files) is not writable"
        elif "disk" in low or "i/o" in low or "full" in low:
            hint = "check the disk"
        else:
            hint = "check the database file"
        if "locked" in low or "busy" in low:  # an outage: the holder will let go
            return StoreUnavailableError(f"ledger: sqlite {op} ({self._path}): {text}; {hint}")
        return StoreError(f"ledger: sqlite {op} ({self._path}): {text}; {hint}")

    def _fetchall(self, op: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except DRIVER_ERRORS as exc:
            rows: list[Any] = self._retry(op, exc, sql, params, many=True)
            return rows

    def _retry(
        self,
        op: str,
        exc: BaseException,
        sql: str,
        params: Sequence[Any],
        *,
        one: bool = False,
        many: bool = False,
    ) -> Any:
        """Run a statement again after a text failure, else raise StoreError.

        A stored value that is not valid UTF-8 switches this connection to
        lossless decoding for good (the driver's str decoding is faster, so it
        stays on until needed); a str that holds such bytes (a lone surrogate)
        is bound as those bytes. Nothing was written when either failure was
        raised (binding fails before the statement runs; decoding fails in a
        read), so running it again is safe. Each remedy is applied once.
        """
        remedies = {"decode", "bind"}
        while True:
            if (
                "decode" in remedies
                and isinstance(exc, sqlite3.OperationalError)
                and _UNDECODABLE in str(exc).lower()
            ):
                remedies.discard("decode")
                self._conn.text_factory = codec.lossless_text
            elif "bind" in remedies and isinstance(exc, UnicodeEncodeError):
                remedies.discard("bind")
                try:
                    sql, params = codec.raw_binding(sql, params)
                except UnicodeEncodeError as bad:  # a surrogate that stands for no byte
                    raise self._error(op, bad) from None
            else:
                raise self._error(op, exc) from None
            try:
                cur = self._cur.execute(sql, params)
                if one:
                    return cur.fetchone()
                if many:
                    return cur.fetchall()
                return None
            except DRIVER_ERRORS as again:
                exc = again

    # -- transactions ------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, depth: int) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT (one fsync), or a savepoint inside it; the
        records `load` read are kept for the transaction (`_seen`). A
        snapshot (dialect.py) is a deferred BEGIN with `query_only` on: it
        takes no write lock, and no row changes under it."""
        savepoint = f"ledger_batch_{depth}"
        reading = depth == 0 and self._snapshot
        with self._errors("begin"):
            begin = "BEGIN" if reading else "BEGIN IMMEDIATE"
            self._conn.execute(begin if depth == 0 else f"SAVEPOINT {savepoint}")
        if depth == 0:
            self._seen = {}
        try:
            try:
                if reading:  # a write in the block fails, rather than take the write lock
                    with self._errors("begin"):
                        self._conn.execute("PRAGMA query_only=ON")
                yield
            except BaseException:
                self._seen = {}
                with contextlib.suppress(sqlite3.Error):
                    if depth == 0:
                        self._conn.execute("ROLLBACK")
                    else:
                        self._conn.execute(f"ROLLBACK TO {savepoint}")
                        self._conn.execute(f"RELEASE {savepoint}")
                raise
            try:
                with self._errors("commit"):
                    self._conn.execute("COMMIT" if depth == 0 else f"RELEASE {savepoint}")
            except StoreError:
                if depth == 0 and self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                raise
        finally:
            if depth == 0:
                self._seen = None
            if reading:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA query_only=OFF")

    def _records_seen(self) -> dict[str, TaskState] | None:
        """Where a ready scan leaves the records it decodes for `load`: this
        transaction's (None outside one)."""
        return self._seen
