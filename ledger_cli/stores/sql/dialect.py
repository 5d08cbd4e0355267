"""What the shared SQL store code asks of a database dialect.

The SQL store is one body of code over two databases, in SQLAlchemy's shape:
the method groups written once (claims.py, reads.py, sidetables.py) are
mixins over `SqlDialect`, which names what they use and what differs by
database: the placeholder, the key order, how one query's rows are fetched
(under the store's lock, with its error mapping and, on SQLite, its text
recovery), which text the database can hold, and the checks on text before
a write. `SQLiteStore` (sqlite.py) and `PostgresStore` (postgres.py) supply
them over their connection bases (sqlite_conn.py, postgres_conn.py), which
are dialects too: each names its driver's errors and maps one to a
StoreError (`_error`), and opens a transaction or a savepoint
(`_transaction`). Written once here: `batch()` around that transaction (the
lock, the depth, the collector's hold), `close()`, the wrapping of a block
in the error mapping, the closed check and the repr.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ledger_cli.engine import collector
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError


class SqlDialect:
    """The connection primitives and dialect facts the shared groups use."""

    MARK: ClassVar[str]
    """The driver's placeholder: `?` (sqlite3) or `%s` (psycopg)."""
    KEY_ORDER: ClassVar[str]
    """`ORDER BY` clause giving UTF-8 byte order of keys where the database can."""
    IN_MAX: ClassVar[int]
    """At most this many values in one `IN` list (`_in`)."""
    GAP_WAIT: ClassVar[float]
    """Seconds `ledger log --follow` waits for a skipped history id (historyfollow.py)."""

    NAME: ClassVar[str]
    """The database in messages: `sqlite` or `postgres`."""
    CLOSE_WAIT: ClassVar[float] = -1
    """Seconds `close()` waits for another thread's call on the connection (-1: no limit)."""

    _conn: Any
    _depth: int
    _lock: threading.RLock
    _closed: bool
    _where: str
    """The database in messages: SQLite's path, PostgreSQL's user@host:port/dbname."""
    _driver_errors: tuple[type[BaseException], ...]
    """What the driver raises: `_errors` maps them to StoreError (`_error`)."""
    _snapshot: bool = False
    """Inside `snapshot()`: the transaction `_transaction` opens only reads."""
    _claim_limits: dict[str, int] | None = None
    """The queues' limits read with a claim's start in this batch (PostgreSQL)."""
    _utf8: bool
    """Key order in the database is UTF-8 byte order (else reads sort in Python)."""

    if TYPE_CHECKING:  # supplied by the connection base and the store class

        def _error(self, op: str, exc: BaseException) -> StoreError: ...

        def _setup(self) -> None:
            """Bring a new connection and the schema up to date."""

        def _transaction(self, depth: int) -> contextlib.AbstractContextManager[None]:
            """The block as one transaction (`depth` 0) or a savepoint of the
            open one (`depth` batches already open), committed when it ends,
            rolled back when it raises (`batch`); a read-only transaction on
            one snapshot while `_snapshot` is set (`snapshot`)."""
            ...

        def _fetchall(self, op: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
            """All rows of one query, under the store's error mapping."""
            ...

        def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool: ...

        def _in(self, column: str, values: tuple[str, ...]) -> tuple[str, tuple[Any, ...]]:
            """`column` equals one of `values`: the SQL condition and its arguments."""
            ...

    def _set_up(self) -> None:
        """`_setup` on the new connection; when it fails, the connection is
        closed (the store never opened) and the error raised."""
        try:
            self._setup()
        except BaseException:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._closed = True
            raise

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction for the block (`_transaction`: one commit).

        Re-entrant: a nested block is a savepoint. An exception rolls back the
        block it leaves (and, unless caught inside, the outer ones). The
        store's lock is held for the block, and the outermost one turns the
        cyclic collector off (engine/collector.py): none while the
        transaction holds the database's locks. Keep batches short.
        """
        with self._lock:
            self._check_open()
            depth = self._depth
            if depth == 0:
                collector.pause()
            try:
                with self._transaction(depth):
                    self._depth = depth + 1
                    try:
                        yield
                    finally:
                        self._depth = depth
            finally:
                if depth == 0:
                    collector.resume()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read-only transaction for the block: every read in it sees the
        database at one instant, and none blocks a writer nor waits for one.
        PostgreSQL: REPEATABLE READ, READ ONLY (at READ COMMITTED each
        statement sees its own instant), whose ready scans lock no row
        (postgres_conn.py `_locking_reads`). SQLite: a deferred transaction
        (BEGIN, never BEGIN IMMEDIATE, which would keep writers out) with
        `query_only` on: in WAL mode its first read fixes the snapshot every
        later read of the transaction sees, while writers commit beside it.
        For reads that must agree with one another: `ledger stats`' figures
        (cli/commands/stats.py `gather`), the drain's stop rule
        (cli/commands/run/idle.py). Inside a snapshot: the same snapshot;
        inside a batch: not allowed."""
        with self._lock:
            if self._snapshot:  # nested: one instant still
                yield
                return
            assert self._depth == 0, "a snapshot opens its own transaction"
            self._snapshot = True
            try:
                with self.batch():
                    yield
            finally:
                self._snapshot = False

    def _close_connection(self) -> None:
        """Close the driver's connection (`close`, under the lock)."""
        with self._errors("close"):
            self._conn.close()

    def close(self) -> None:
        # A thread blocked on a stalled connection may hold the lock: the
        # dialect says how long to wait for it (CLOSE_WAIT) before giving up
        # on a clean close (the process is ending; the socket goes with it).
        if not self._lock.acquire(timeout=self.CLOSE_WAIT):
            self._closed = True
            return
        try:
            if not self._closed:
                self._closed = True
                self._close_connection()
        finally:
            self._lock.release()

    def _rows(self, op: str, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """All rows of one query, under the lock and the store's error mapping."""
        with self._lock:
            self._check_open()
            return self._fetchall(op, sql, args)

    @contextlib.contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        """Driver errors in the block raised as StoreError (of operation `op`)."""
        try:
            yield
        except self._driver_errors as exc:
            raise self._error(op, exc) from None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"ledger: {self.NAME} store {self._where} is closed")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._where!r})"

    def _sql(self, template: str) -> str:
        """A statement of pause.py, schedules.py or queues.py (`{p}`: a parameter)."""
        return template.format(p=self.MARK)

    def _holds(self, text: str) -> bool:
        """The database can hold `text` (else no row has it: a read of it finds nothing)."""
        return True

    def holds(self, key: str) -> bool:
        """Whether a record could have `key` (False: PostgreSQL cannot hold it,
        so no row has it; `load` refuses it as a write would: `serve` answers
        no such key instead, as `list` finds none)."""
        return self._holds(key)

    def _check_text(self, key: str, **fields: str) -> None:
        """Refuse (StoreError) a key or text the database cannot store."""

    def _queue_tables(self) -> bool:
        """`ledger_queue` and `ledger_limit` exist (an older SQLite file has neither)."""
        return True

    def _make_queue_tables(self) -> None:
        """Make them before a first write to them, where the schema may lack them."""

    def _revoked_table(self) -> bool:
        """`ledger_revoked` exists (an older SQLite file lacks it)."""
        return True

    def _holdable(self, values: Iterable[str]) -> tuple[str, ...]:
        """`values` once each, without those the database cannot hold."""
        return tuple(v for v in dict.fromkeys(values) if self._holds(v))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _in_key_order(self, records: list[TaskState]) -> list[TaskState]:
        if not self._utf8:  # the database's key order is not byte order
            records.sort(key=lambda r: byte_order(r.key))
        return records
