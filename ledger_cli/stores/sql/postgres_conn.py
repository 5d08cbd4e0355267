"""The PostgreSQL store's connection: opening, reconnecting, errors, transactions.

`PostgresConnection` is the base of `PostgresStore` (postgres.py) and of its
method groups (claims.py, reads.py, sidetables.py):
it loads psycopg lazily, parses the URL and connects (autocommit), runs the
schema set-up (postgres_schema.py), replaces a lost connection outside a
batch, maps driver errors to StoreError / StoreConflictError /
StoreUnavailableError (a login the server refused is a StoreLoginError:
postgres_login.py), and owns the transaction that `batch()` (dialect.py)
runs (nested savepoints, on a pipeline when psycopg has one: postgres_tx.py),
the server's clock and the blocks lock of engine/serial.py. It also holds the
state a batch keeps: the rows this transaction holds locked and the rows read
ahead for the next `load`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import (
    StoreConflictError,
    StoreError,
    StoreLoginError,
    StoreUnavailableError,
    StoreURLError,
)
from ledger_cli.stores.sql import codec, postgres_schema, postgres_tx, postgres_url
from ledger_cli.stores.sql.dialect import SqlDialect

if TYPE_CHECKING:
    import psycopg

# Writers of blocks and un-blocks (engine/serial.py): one lock per schema ("ledg").
_BLOCKS_LOCK_SQL = "SELECT pg_advisory_xact_lock(1818584167, hashtext(current_schema()))"
_CLOCK = "SELECT clock_timestamp()"
_SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"

_INSTALL_HINT = "pip install 'ledger_cli[postgres]'"

ANALYZE_AFTER = 200
"""Records a connection inserts before its first ANALYZE (`refresh_stats`)."""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            f"ledger: the PostgreSQL store needs the psycopg driver: {_INSTALL_HINT}"
        ) from None
    _quiet(psycopg)
    return psycopg


def _quiet(psycopg: Any) -> None:
    """Keep psycopg's own warnings (`error ignored terminating <psycopg.Pipeline
    [BAD]>: the connection is lost`, logged as it cleans up after a lost
    connection) off stderr: the error itself reaches the caller as a
    StoreError. Without a handler of its own, Python's last-resort handler
    prints them; an application that configures logging still gets them."""
    import logging

    log = logging.getLogger("psycopg")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        log.addHandler(logging.NullHandler())


def _bad_url(text: str, url: str, what: str = "URL") -> StoreURLError:
    """A usage error (exit 2): `text` says what libpq refuses, the URL's
    password never shown."""
    from ledger_cli.stores import without_secrets

    return StoreURLError(
        f"ledger: bad PostgreSQL {what}: {without_secrets(text, url)}; "
        "use postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
    )


class PostgresConnection(SqlDialect):
    """The connection, error mapping and batches of a `PostgresStore`."""

    NAME = "postgres"
    CLOSE_WAIT = 1.0  # a thread blocked on a stalled connection holds the lock

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        pg = _psycopg()
        self._psycopg = pg
        self._driver_errors = (pg.Error, UnicodeError)
        self._lock = threading.RLock()
        self._depth = 0
        self._blocks_depth = 0  # the batch depth that took lock_blocks' lock; 0: not held
        self._closed = False
        self._lost = False
        """A connection error was seen: reconnect before the next statement
        outside a batch (psycopg may not have marked the connection broken)."""
        self._where = "the given URL"
        self._held: dict[str, TaskState] = {}
        """Rows this transaction holds locked, by key (only while _depth > 0).
        Every write to ledger_tasks goes through compare_and_swap, which keeps
        it current; a statement writing ledger_tasks otherwise must drop the
        keys it touches."""
        self._claim_start: tuple[Instant, int | None] | None = None
        """The server's clock and the first priority level of ledger_due, read
        with a `--next` claim's pause check (`read_pause(for_claim=True)`, one
        round trip for the three) for that claim's `ready_at_clock`; dropped by
        it, and at the batch's end."""
        self._claim_limits: dict[str, int] | None = None
        """The queues' limits (docs/design.md §8.7), read in the same round trip as
        `_claim_start`, for that claim's `limits()` in this batch; dropped at
        the batch's end."""
        self._preloaded: dict[str, TaskState | None] = {}
        """Rows `now_with` read (plainly, no lock) for the next `load` of their
        key in this batch, which takes them (once): that load then costs no
        round trip and returns what it would have read at that point of the
        transaction. Dropped with `_held`, and by a write of the key."""
        self._inserts = 0
        """Records this connection has inserted (`refresh_stats`)."""
        self._analyzed_at = 0
        """`_inserts` when this connection last ran ANALYZE."""
        kwargs: dict[str, Any] = {}
        try:
            params = pg.conninfo.conninfo_to_dict(url)
        except pg.Error as exc:
            # A usage error (nothing was opened); libpq quotes the URL: no password shown.
            raise _bad_url(codec.one_line(exc), url) from None
        bad = postgres_url.check(params)
        if bad is not None:  # before connecting (docs/design.md §3.4)
            raise _bad_url(bad, url)
        self._where = self._describe(params)
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = connect_timeout
        if "application_name" not in params:
            kwargs["application_name"] = "ledger_cli"
        self._url, self._kwargs = url, kwargs
        self._conn: psycopg.Connection[Any] = self._connect()
        self._pipeline = (
            postgres_tx.Pipelined(self._conn, pg) if postgres_tx.supported(pg) else None
        )
        """Batches on a pipeline (stores/sql/postgres_tx.py); None: psycopg's transactions."""
        self._set_up()

    def _connect(self) -> psycopg.Connection[Any]:
        pg = self._psycopg
        try:
            conn: psycopg.Connection[Any] = pg.connect(self._url, autocommit=True, **self._kwargs)
        except pg.Error as exc:
            # Only on a failed connection: not imported by every command's start-up.
            from ledger_cli.stores.sql import postgres_login

            text = codec.one_line(exc)
            if postgres_url.refused_setting(text):  # libpq's verdict on a setting, no outage
                text = text.removeprefix("connection is bad: ")
                raise _bad_url(text, self._url, "setting (in the URL or a PG* variable)") from None
            reason = postgres_login.refusal(exc, text)
            if reason is not None:  # a verdict: trying again changes nothing
                raise StoreLoginError(
                    f"ledger: cannot connect to PostgreSQL at {self._where}: {reason}; "
                    "check the user, password and database in the URL"
                ) from None
            raise StoreUnavailableError(
                f"ledger: cannot connect to PostgreSQL at {self._where}: {text}; "
                "check that the server is running and the URL (host, port, user, password, "
                "database) is right"
            ) from None
        return conn

    def _reconnect_if_lost(self) -> None:
        """Outside a batch: replace a connection that was lost (a server
        restart, a network cut) by a new one, so that the store outlives an
        outage. Inside a batch the transaction died with its connection: the
        error stands, and the next batch reconnects. Setup (the schema) is not
        run again: the tables outlive a restart."""
        conn = self._conn
        if not (conn.closed or conn.broken or self._lost):
            return
        new = self._connect()  # StoreUnavailableError while the server is away
        with contextlib.suppress(Exception):
            conn.close()
        self._conn, self._lost = new, False
        if self._pipeline is not None:
            self._pipeline = postgres_tx.Pipelined(new, self._psycopg)

    def interrupt(self) -> None:
        """Cut the connection under a call another thread is blocked in (a
        read on a stalled connection never returns by itself): that call fails
        with StoreUnavailableError, and the next call outside a batch opens a
        new connection. Takes no lock (the blocked call holds it)."""
        import os
        import socket

        self._lost = True
        with contextlib.suppress(Exception):
            sock = socket.socket(fileno=os.dup(self._conn.fileno()))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    @staticmethod
    def _describe(params: dict[str, Any]) -> str:
        """user@host:port/dbname of a connection (never the password), for messages."""
        user = f"{params['user']}@" if params.get("user") else ""
        host = str(params.get("host") or params.get("hostaddr") or "localhost")
        port = f":{params['port']}" if params.get("port") else ""
        dbname = f"/{params['dbname']}" if params.get("dbname") else ""
        return f"{user}{host}{port}{dbname}"

    # -- set-up ------------------------------------------------------------------

    def _setup(self) -> None:
        with self._errors("schema"):
            postgres_schema.setup(self._conn)

    # -- errors ------------------------------------------------------------------

    def _error(self, op: str, exc: BaseException) -> StoreError:
        psycopg = self._psycopg
        text = codec.one_line(exc)
        if isinstance(exc, UnicodeError):
            hint = "keys and text must be valid Unicode (no lone surrogates)"
        elif isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
            hint = "two transactions waited for each other; nothing was written, retry"
            return StoreConflictError(f"ledger: postgres {op} ({self._where}): {text}; {hint}")
        elif isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
            hint = "check the database and the search_path in the URL"
        elif isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            hint = "the connection to the server failed; check the server and retry"
            self._lost = True
            return StoreUnavailableError(f"ledger: postgres {op} ({self._where}): {text}; {hint}")
        else:
            hint = "check the server log"
        return StoreError(f"ledger: postgres {op} ({self._where}): {text}; {hint}")

    def _check_open(self) -> None:
        super()._check_open()
        if not self._depth:
            self._reconnect_if_lost()

    # -- transactions and the clock ----------------------------------------------

    @contextlib.contextmanager
    def _transaction(self, depth: int) -> Iterator[None]:
        """A transaction, or a savepoint inside it; on a pipeline when psycopg
        has one (BEGIN and COMMIT ride with statements: postgres_tx.py). Rows
        written in it stay locked until it ends. What the transaction holds
        (`_held`, the claim's start, the rows read ahead) is dropped when it
        ends or a savepoint rolls back."""
        tx: contextlib.AbstractContextManager[Any]
        if self._pipeline is None:
            tx = self._conn.transaction()
        elif depth == 0:
            tx = self._pipeline.transaction()
        else:
            tx = self._pipeline.savepoint(depth + 1)
        done = False
        try:
            with self._errors("commit"), tx:
                if depth == 0 and self._snapshot:  # snapshot() (dialect.py)
                    with self._errors("snapshot"):
                        self._conn.execute(_SNAPSHOT_SQL)
                yield
            done = True
            if depth == 0:
                self.refresh_stats()
        finally:
            if depth < self._blocks_depth:  # committed, or its savepoint left
                self._blocks_depth = 0
            if not done or depth == 0:
                self._held.clear()  # rolled back, or the locks are gone
                self._claim_start = None
                self._claim_limits = None
                self._preloaded.clear()

    def refresh_stats(self) -> None:
        """ANALYZE the tasks and their needs once this connection has inserted
        ANALYZE_AFTER records, then each time it has doubled them. The planner
        judges a fresh schema by its empty-table statistics until autovacuum
        (a minute apart) catches up: after one large `admit --batch`, the
        trigger's check of a fan-in's unmet needs was planned as a nested loop
        over every task, once per completed need. Best effort: a failure here
        is left to autovacuum, the write having committed."""
        since = self._inserts - self._analyzed_at
        if since < max(ANALYZE_AFTER, self._analyzed_at):
            return
        self._analyzed_at = self._inserts
        with contextlib.suppress(self._psycopg.Error):
            self._conn.execute("ANALYZE ledger_tasks, ledger_needs")

    def _locking_reads(self) -> bool:
        """Whether the ready scans lock what they read (FOR UPDATE SKIP LOCKED):
        inside a batch, but for a snapshot (dialect.py `snapshot`: a row another
        worker is claiming reads as it was, ready, and a row committed since
        the snapshot raises no serialization error)."""
        return self._depth > 0 and not self._snapshot

    def now(self) -> Instant:
        """The server's `clock_timestamp()` (microseconds), in UTC."""
        with self._lock:
            self._check_open()
            with self._errors("clock"):
                row = self._conn.execute(_CLOCK).fetchone()
        return self._instant(row)

    def _instant(self, row: Any) -> Instant:
        if row is None:
            raise StoreError(f"ledger: postgres clock ({self._where}): no row returned")
        return Instant.from_datetime(row[0]).utc()

    # -- blocks and un-blocks (docs/design.md §6.2; engine/serial.py) ----------------------

    def lock_blocks(self) -> bool:
        """Inside a batch: take the lock that serializes the transactions writing
        a block, a failure or an un-block (`pg_advisory_xact_lock` on a key of
        this schema, held to the commit) and return True; outside: False."""
        with self._lock:
            self._check_open()
            if self._depth == 0:
                return False
            if self._blocks_depth == 0:
                with self._errors("lock"):
                    self._conn.execute(_BLOCKS_LOCK_SQL)
                self._blocks_depth = self._depth
            return True

    # -- lifecycle ---------------------------------------------------------------

    def _close_connection(self) -> None:
        if self._conn.broken:
            with contextlib.suppress(Exception):
                self._conn.close()
            return
        super()._close_connection()
