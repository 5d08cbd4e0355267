"""PostgresStore: the SQL store for workers on several hosts (SPEC §3.4).

The same table design as the SQLite store (and the Go `SQLiteStore`), on
PostgreSQL via psycopg 3 (the `postgres` extra):
- `key` is `text COLLATE "C"`, so the primary-key order is UTF-8 byte order;
- sequences, fences and revs are `numeric(20,0)` with a check keeping them in
  0..2^64-1 (`bigint` stops at 2^63-1);
- times are RFC3339Nano text (`''` for zero): `timestamptz` would drop
  nanoseconds and the offset;
- `needs` is JSON text (`null` for nil, departure 4) and `task` the exact bytes
  Go's `json.Marshal` writes, in a `bytea` (`jsonb` would reorder keys and
  reformat numbers).
Compare-and-swap is one statement whose row count decides (`INSERT … ON
CONFLICT (key) DO NOTHING`, or `UPDATE … WHERE key AND sequence AND status AND
fence AND rev`); under READ COMMITTED a concurrent update of the same row makes
the loser re-check the WHERE against the winner's row, so no update is lost.

Connection settings come from the `postgresql://` URL (libpq syntax: host
lists, `sslmode`, `options=-c search_path=…`, …). PostgreSQL text cannot hold
NUL, so a key or other text field with one is a StoreError. Nor can it hold
text that is not valid UTF-8 (the server refuses it in a UTF8 database), so the
"invalid bytes from the Go service" case of the SQLite store cannot arise here:
a key given with such bytes has no record (load returns None) and writing such
text is a StoreError.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.rerun import rerun
from ledger_cli.errors import StoreConflictError, StoreError, StoreUnavailableError
from ledger_cli.stores.sql import codec, pause, postgres_due, postgres_tx, readyindex, schedules

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore"]

_UINT = "numeric(20,0) NOT NULL DEFAULT 0 CHECK ({col} BETWEEN 0 AND 18446744073709551615)"

_DDL: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS ledger_tasks ("
    ' key text COLLATE "C" PRIMARY KEY,'
    " status text NOT NULL,"
    f" sequence {_UINT.format(col='sequence')},"
    " owner text NOT NULL DEFAULT '',"
    f" fence {_UINT.format(col='fence')},"
    " lease_until text NOT NULL DEFAULT '',"
    " needs text NOT NULL DEFAULT '[]',"
    " blocked_by text NOT NULL DEFAULT '',"
    " task bytea,"
    f" rev {_UINT.format(col='rev')},"
    " created_at text NOT NULL DEFAULT '',"
    " updated_at text NOT NULL DEFAULT '',"
    " created_by text NOT NULL DEFAULT '',"
    " updated_by text NOT NULL DEFAULT '')",
    *(
        f"ALTER TABLE ledger_tasks ADD COLUMN IF NOT EXISTS {col} text NOT NULL DEFAULT ''"
        for col in codec.MIGRATED_COLUMNS
    ),
    "CREATE INDEX IF NOT EXISTS ledger_tasks_claimable"
    ' ON ledger_tasks (status, created_at COLLATE "C", key)',
    "CREATE TABLE IF NOT EXISTS ledger_history ("
    " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    " time text NOT NULL,"
    " actor text NOT NULL,"
    " event text NOT NULL,"
    ' key text COLLATE "C" NOT NULL,'
    " fence numeric(20,0) NOT NULL CHECK (fence BETWEEN 0 AND 18446744073709551615),"
    " data text NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ledger_history_key ON ledger_history (key, id)",
    *pause.PG_DDL,
    *schedules.PG_DDL,
)

_SCHEMA_CHECK = """
SELECT
  (SELECT count(*) FROM pg_attribute
    WHERE attrelid = to_regclass(quote_ident(current_schema()) || '.ledger_tasks')
      AND attnum > 0 AND NOT attisdropped AND attname = ANY(%s)),
  to_regclass(quote_ident(current_schema()) || '.ledger_tasks_claimable') IS NOT NULL,
  to_regclass(quote_ident(current_schema()) || '.ledger_history') IS NOT NULL,
  to_regclass(quote_ident(current_schema()) || '.ledger_history_key') IS NOT NULL,
  to_regclass(quote_ident(current_schema()) || '.ledger_pause') IS NOT NULL,
  to_regclass(quote_ident(current_schema()) || '.ledger_schedule') IS NOT NULL,
  to_regclass(quote_ident(current_schema()) || '.ledger_due') IS NOT NULL,
  EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'ledger_due_sync'
    AND pronamespace = to_regnamespace(quote_ident(current_schema()))
    AND strpos(prosrc, %s) > 0),
  EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'ledger_ready_sync'
    AND tgrelid = to_regclass(quote_ident(current_schema()) || '.ledger_tasks')),
  EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'ledger_ready_sync'
    AND pronamespace = to_regnamespace(quote_ident(current_schema()))
    AND strpos(prosrc, %s) > 0)
"""
"""One round trip on open: every Go column, the indexes, the history table, the
ready index's trigger (SPEC §6.1) and its function's version. When all are
there, no DDL runs."""

_SETUP_LOCK = 0x6C6564676572  # pg_advisory_xact_lock key ("ledger"): openers serialise DDL
# Writers of blocks and un-blocks (engine/serial.py): one lock per schema ("ledg").
_BLOCKS_LOCK_SQL = "SELECT pg_advisory_xact_lock(1818584167, hashtext(current_schema()))"

_LOAD = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE key = %s"
_RANGE = f'SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks ORDER BY key COLLATE "C"'
_DEPENDENTS = (
    f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks"
    " WHERE key IN (SELECT key FROM ledger_needs WHERE need = ANY(%s))"
)
_CLOCK = "SELECT clock_timestamp()"
# The server's clock and a key's row in one statement (a row even for a key
# with no record): statement_timestamp() is read as the statement starts, so
# before the row's snapshot is taken, as reading the clock and then the record.
_CLOCKED_LOAD = (
    "SELECT statement_timestamp(), "
    + ", ".join(f"t.{c.strip()}" for c in codec.SELECT_COLUMNS.split(","))
    + " FROM (SELECT 1) c LEFT JOIN ledger_tasks t ON t.key = %s"
)
_CLOCKED_PAGE = readyindex.clocked_page_sql(codec.SELECT_COLUMNS, readyindex.PG_LEASE)
_CLAIM_START = (
    "SELECT paused, since, actor, reason, clock_timestamp(),"
    " (SELECT min(rank) FROM ledger_due WHERE rank > -1000001)"
    " FROM ledger_pause WHERE id = 1 FOR SHARE"
)
"""A `--next` claim's first statement: the pause (read FOR SHARE, SPEC §8.3), the
server's clock and the first priority level of the due index (SPEC §8.2)."""
_BY_STATUS = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE status = ANY(%s)"
_BY_STATUS_HEAD = f'{_BY_STATUS} ORDER BY key COLLATE "C" LIMIT %s'
_BLOCKED_BY = "SELECT DISTINCT blocked_by FROM ledger_tasks WHERE status = 'blocked'"
# Both writes return the row they wrote (no second round trip to read it back).
_INSERT = (
    "INSERT INTO ledger_tasks (key, status, sequence, owner, fence, lease_until, needs,"
    " blocked_by, task, rev, created_at, updated_at, created_by, updated_by)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 0, %s, %s, %s, %s)"
    f" ON CONFLICT (key) DO NOTHING RETURNING {codec.SELECT_COLUMNS}"
)
_UPDATE = (
    "UPDATE ledger_tasks SET status = %s, sequence = %s, owner = %s, fence = %s,"
    " lease_until = %s, needs = %s, blocked_by = %s, task = %s, rev = rev + 1,"
    " updated_at = %s, updated_by = %s"
    " WHERE key = %s AND sequence = %s AND status = %s AND fence = %s AND rev = %s"
    f" RETURNING {codec.SELECT_COLUMNS}"
)
_HISTORY_INSERT = (
    f"INSERT INTO ledger_history ({codec.HISTORY_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
)

_CLOSE_WAIT = 1.0
"""Seconds `close()` waits for another thread's call on the connection."""

_INSTALL_HINT = "pip install 'ledger_cli[postgres]'"


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


def _no_nul(key: str, **fields: str) -> None:
    if not codec.is_utf8(key):
        raise StoreError(
            f"ledger: PostgreSQL cannot store key {codec.hex_bytes(key)!r}: "
            "text must be valid UTF-8"
        )
    if "\x00" in key:
        raise StoreError(
            f"ledger: PostgreSQL cannot store key {key!r}: text cannot contain a NUL character"
        )
    for name, value in fields.items():
        if isinstance(value, str) and "\x00" in value:
            raise StoreError(
                f"ledger: PostgreSQL cannot store {name} {value!r} of key {key!r}: "
                "text cannot contain a NUL character"
            )


def _state_fields(rec: TaskState) -> dict[str, str]:
    return {
        "status": rec.status,
        "owner": rec.owner,
        "blocked_by": rec.blocked_by,
        "created_by": rec.created_by,
        "updated_by": rec.updated_by,
    }


class PostgresStore:
    """A Store in a PostgreSQL database, for workers on several hosts.

    One connection (autocommit; `batch()` opens a transaction), guarded by a
    lock so threads may share the store. `now()` reads the server's clock.

    Inside a batch, the rows this transaction holds locked (the ones it wrote,
    each returned by its INSERT/UPDATE, and the candidates `ready_candidates`
    read FOR UPDATE) are kept, so `load` of such a key costs no round trip: no
    other transaction can change them before this one ends. The cache is
    dropped when the batch ends and whenever a nested batch rolls back.

    Two hooks let a unit of the command line read the clock inside its batch
    without a round trip of its own (cli/context.py `Session.unit_now`):
    `now_with(key)` reads it with the load of `key`, `ready_at_clock()` with
    the first ready candidate.
    """

    def __init__(self, url: str, *, connect_timeout: int = 10) -> None:
        pg = _psycopg()
        self._psycopg = pg
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
        self._preloaded: dict[str, TaskState | None] = {}
        """Rows `now_with` read (plainly, no lock) for the next `load` of their
        key in this batch, which takes them (once): that load then costs no
        round trip and returns what it would have read at that point of the
        transaction. Dropped with `_held`, and by a write of the key."""
        kwargs: dict[str, Any] = {}
        try:
            params = pg.conninfo.conninfo_to_dict(url)
        except pg.Error as exc:
            raise StoreError(
                f"ledger: bad PostgreSQL URL: {codec.one_line(exc)}; "
                "use postgresql://USER:PASSWORD@HOST:PORT/DATABASE"
            ) from None
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
        try:
            self._setup()
        except BaseException:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._closed = True
            raise

    def _connect(self) -> psycopg.Connection[Any]:
        pg = self._psycopg
        try:
            conn: psycopg.Connection[Any] = pg.connect(self._url, autocommit=True, **self._kwargs)
        except pg.Error as exc:
            raise StoreUnavailableError(
                f"ledger: cannot connect to PostgreSQL at {self._where}: {codec.one_line(exc)}; "
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
            args = (list(codec.ALL_COLUMNS), postgres_due.DUE_VERSION, readyindex.PG_SYNC_VERSION)
            row = self._conn.execute(_SCHEMA_CHECK, args).fetchone()
            if row is not None and row[0] == len(codec.ALL_COLUMNS) and all(row[1:]):
                return  # up to date: no DDL, no lock
            with self._conn.transaction():
                self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                for ddl in _DDL:
                    self._conn.execute(ddl)
                if not self._ready_installed():  # the ready index (SPEC §6.1), built once
                    for ddl in (*readyindex.PG_DDL, *readyindex.PG_REBUILD):
                        self._conn.execute(ddl)
                else:  # an older trigger function: replace it (the index stays)
                    for ddl in readyindex.PG_DDL:
                        self._conn.execute(ddl)
                # The Ready order of SPEC §8.2 (stores/sql/postgres_due.py): built by the first
                # opener that finds it missing or older, then kept by its triggers.
                row = self._conn.execute(
                    postgres_due.INSTALLED, (postgres_due.DUE_VERSION,)
                ).fetchone()
                for ddl in postgres_due.DDL:
                    self._conn.execute(ddl)
                if row is None or not row[0]:
                    for sql in postgres_due.REBUILD:
                        self._conn.execute(sql)

    def _ready_installed(self) -> bool:
        row = self._conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'ledger_ready_sync'"
            " AND tgrelid = to_regclass(quote_ident(current_schema()) || '.ledger_tasks')"
        ).fetchone()
        return row is not None and row[0] == 1

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

    @contextlib.contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except (self._psycopg.Error, UnicodeError) as exc:
            raise self._error(op, exc) from None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"ledger: postgres store {self._where} is closed")
        if not self._depth:
            self._reconnect_if_lost()

    # -- Store -------------------------------------------------------------------

    def load(self, key: str) -> TaskState | None:
        if not codec.is_utf8(key):
            return None  # PostgreSQL text holds valid UTF-8 only: no such row exists
        _no_nul(key)
        with self._lock:
            self._check_open()
            if self._depth:
                held = self._held.get(key)
                if held is not None:
                    return held
                if key in self._preloaded:
                    return self._preloaded.pop(key)
            with self._errors("load"):
                row = self._conn.execute(_LOAD, (key,)).fetchone()
        return None if row is None else codec.row_to_state(row)

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        _no_nul(key, **_state_fields(new))
        if old is None:
            params = codec.insert_params(key, new, codec.UINT64_MAX)
            sql, op = _INSERT, "insert"
        else:
            if not codec.tuple_fits(old, codec.UINT64_MAX) or "\x00" in old.status:
                return False
            params = codec.update_params(key, old, new, codec.UINT64_MAX)
            sql, op = _UPDATE, "update"
        with self._lock:
            self._check_open()
            if not self._depth:  # a statement of its own: run again if rolled back
                return rerun(lambda: self._swap(sql, params, op) is not None)
            self._preloaded.pop(key, None)
            row = self._swap(sql, params, op)
            if row is None:
                self._held.pop(key, None)
            else:
                self._held[key] = codec.row_to_state(row)
            return row is not None

    def _swap(self, sql: str, params: Sequence[object], op: str) -> Any:
        with self._errors(op):
            return self._conn.execute(sql, params).fetchone()

    def range(self) -> Iterator[TaskState]:
        """Every record sorted by key (UTF-8 bytes), read by one statement (one snapshot)."""
        with self._lock:
            self._check_open()
            with self._errors("range"):
                rows = self._conn.execute(_RANGE).fetchall()
        return iter([codec.row_to_state(row) for row in rows])

    def by_status(self, statuses: Iterable[str]) -> list[TaskState]:
        """Records whose status is one of `statuses`, oldest CreatedAt first, then key.

        Served by the (status, created_at, key) index.
        """
        wanted = [s for s in dict.fromkeys(statuses) if "\x00" not in s]
        if not wanted:
            return []
        with self._lock:
            self._check_open()
            with self._errors("scan"):
                rows = self._conn.execute(_BY_STATUS, (wanted,)).fetchall()
        return codec.claimable_order(codec.row_to_state(row) for row in rows)

    def by_status_head(self, statuses: Iterable[str], limit: int) -> list[TaskState]:
        """The first `limit` records whose status is one of `statuses`, in key
        order (UTF-8 bytes: COLLATE "C"), sorted in the database (`watch`
        draws no more)."""
        wanted = [s for s in dict.fromkeys(statuses) if "\x00" not in s]
        if not wanted or limit <= 0:
            return []
        with self._lock:
            self._check_open()
            with self._errors("scan"):
                rows = self._conn.execute(_BY_STATUS_HEAD, (wanted, limit)).fetchall()
        return [codec.row_to_state(row) for row in rows]

    def blocked_by_keys(self) -> list[str]:
        """The keys blocked records are blocked by, each once (`watch`'s failed roots)."""
        with self._lock:
            self._check_open()
            with self._errors("scan"):
                rows = self._conn.execute(_BLOCKED_BY).fetchall()
        return [str(row[0]) for row in rows]

    orders_schedules = True
    """`ready_candidates` yields the Ready order of SPEC §8.2 and leaves out tasks
    not yet due (stores/sql/postgres_due.py): cli/ready.py needs no scan."""

    def ready_candidates(
        self, now: Instant | None = None, first_rank: tuple[int | None] | None = None
    ) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed and
        that are due, in the Ready order (priority, due, key), through the
        trigger-kept `ledger_due` table (stores/sql/postgres_due.py). Inside a batch each
        is read with FOR UPDATE SKIP LOCKED, one row at a time, as below."""
        locking = self._depth > 0
        page = 1 if locking else 16
        sql = postgres_due.page_sql(
            codec.SELECT_COLUMNS, readyindex.PG_LEASE, lock=locking, limit=page
        )
        at = readyindex.sortable(now)
        rank = -1_000_001
        found: Any
        while True:
            if first_rank is not None:  # read already (`_claim_start`)
                found, first_rank = first_rank, None
            else:
                with self._lock:
                    self._check_open()
                    with self._errors("ready scan"):
                        found = self._conn.execute(postgres_due.NEXT_RANK, (rank,)).fetchone()
            if found is None or found[0] is None:
                return
            rank = int(found[0])
            after = ("", "")
            while True:
                with self._lock:
                    self._check_open()
                    with self._errors("ready scan"):
                        args = (rank, at, after[0], after[1], at)
                        rows = list(self._conn.execute(sql, args).fetchall())
                    recs = [codec.row_to_state(row[:-1]) for row in rows]
                    if locking and self._depth:  # locked until the batch ends
                        for rec in recs:
                            self._held[rec.key] = rec
                yield from recs
                if len(rows) < page:
                    break
                after = (str(rows[-1][-1]), str(rows[-1][0]))

    def _ready_candidates_created(
        self, now: Instant | None = None, *, after: tuple[str, str] = ("", "")
    ) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed, in
        Ready order, through the trigger-kept `ledger_ready` table.

        Inside a batch (a transaction: `claim --next`) each candidate is read
        with FOR UPDATE SKIP LOCKED, one row at a time: the row stays locked
        until the batch ends, and concurrent claimers skip it rather than pile
        onto it. The claim itself is still the engine's fenced compare-and-swap.
        `after`: start after this (created, key) (`ready_at_clock`'s next pages).
        """
        return self._ready_pages(now, after, self._depth > 0, None)

    def ready_split(self, now: Instant) -> tuple[int, TaskState | None, Iterator[TaskState]]:
        """`ledger stats`' ready figures with the counting done in SQL: how many
        pending candidates name no needs (each one is ready), the first of them
        in Ready order, and every other candidate (claimed, or naming needs;
        in Ready order) for the caller to judge by the Ready rule.
        Read without row locks, inside a batch or not."""
        with self._lock:
            self._check_open()
            with self._errors("ready count"):
                row = self._conn.execute(readyindex.FREE_COUNT).fetchone()
        free = 0 if row is None else int(row[0])
        first = next(self._ready_pages(now, ("", ""), False, readyindex.FREE), None)
        return free, first, self._ready_pages(now, ("", ""), False, readyindex.NOT_FREE)

    def _ready_pages(
        self, now: Instant | None, after: tuple[str, str], locking: bool, only: str | None
    ) -> Iterator[TaskState]:
        page = 1 if locking else 16
        sql = readyindex.page_sql(
            codec.SELECT_COLUMNS, "%s", readyindex.PG_LEASE, lock=locking, limit=page, only=only
        )
        at = readyindex.sortable(now)

        def fetch(created: str, key: str, limit: int) -> list[Any]:
            with self._lock:
                self._check_open()
                with self._errors("ready scan"):
                    args = (created, key, at)  # the limit (page) is in the SQL
                    rows = list(self._conn.execute(sql, args).fetchall())
                if locking and self._depth:  # locked until the batch ends
                    for row in rows:
                        rec = codec.row_to_state(row[:-1])
                        self._held[rec.key] = rec
                return rows

        return readyindex.candidates(fetch, page, after)

    def ready_at_clock(self) -> tuple[Instant, Iterator[TaskState]] | None:
        """`(now, ready_candidates(now))` with `now` the server's clock, read
        inside the batch by the first page query itself (`clock_timestamp()`
        as its lease cut-off, returned with the row): the clock costs no round
        trip of its own. None when that page is empty (the clock was not
        read: no candidate, nothing to judge). Outside a batch: `now()`, then
        the candidates."""
        with self._lock:
            self._check_open()
            start, self._claim_start = self._claim_start, None
            if self.orders_schedules or not self._depth:  # the clock, then the due index
                if start is not None and self._depth:  # read with the pause check
                    now, cands = start[0], self.ready_candidates(start[0], (start[1],))
                else:
                    now = self.now()
                    cands = self.ready_candidates(now)
                if not self._depth:
                    return now, cands
                head = next(cands, None)
                if head is None:
                    return None  # no candidate: nothing to judge
                return now, itertools.chain((head,), cands)
            with self._errors("ready scan"):
                rows = self._conn.execute(_CLOCKED_PAGE).fetchall()
            if not rows:
                return None
            row = rows[0]
            now = Instant.from_datetime(row[-1]).utc()
            first = codec.row_to_state(row[:-2])
            self._held[first.key] = first  # locked (FOR UPDATE) until the batch ends
        rest = self._ready_candidates_created(now, after=(str(row[-2]), str(row[0])))
        return now, itertools.chain((first,), rest)

    # -- prune (SPEC §6.4; engine/prune.py): pruned keys in ledger_pruned ----------

    def prune_records(self, pairs: Sequence[tuple[TaskState, TaskState]]) -> int:
        """Store each pruned record (a compare-and-swap), mark it, drop its history;
        one transaction per CHUNK records."""
        from ledger_cli.engine.prune import CHUNK

        done = 0
        for at in range(0, len(pairs), CHUNK):
            with self.batch():
                for old, new in pairs[at : at + CHUNK]:
                    if self.compare_and_swap(old.key, old, new):
                        with self._errors("prune"):
                            self._conn.execute(
                                "INSERT INTO ledger_pruned (key) VALUES (%s)"
                                " ON CONFLICT DO NOTHING",
                                (old.key,),
                            )
                            self._conn.execute(
                                "DELETE FROM ledger_history WHERE key = %s", (old.key,)
                            )
                        done += 1
        return done

    def _records(self, sql: str, args: tuple[Any, ...] = ()) -> list[TaskState]:
        with self._lock:
            self._check_open()
            with self._errors("scan"):
                rows = self._conn.execute(sql, args).fetchall()
        records = [codec.row_to_state(row) for row in rows]
        return records

    def dependents(self, keys: Iterable[str]) -> list[TaskState]:
        """The records naming any of `keys` in their needs (engine
        `dependents_walk`), through the trigger-kept `ledger_needs` table
        (every record's needs, indexed by need)."""
        wanted = [k for k in dict.fromkeys(keys) if "\x00" not in k and codec.is_utf8(k)]
        if not wanted:
            return []
        return self._records(_DEPENDENTS, (wanted,))

    def visible_range(self) -> Iterator[TaskState]:
        """Every record but the pruned ones, sorted by key, read in pages of 1000
        (keyset): `list` prints its first rows at once, in constant memory."""
        sql = readyindex.visible_page_sql(codec.SELECT_COLUMNS, "%s")
        yield from codec.read_record_pages(self._records, sql)

    def pruned_range(self) -> Iterator[TaskState]:
        """The pruned records, sorted by key."""
        return iter(self._records(readyindex.pruned_sql(codec.SELECT_COLUMNS)))

    def is_pruned(self, key: str) -> bool:
        with self._lock:
            self._check_open()
            with self._errors("load"):
                sql = "SELECT 1 FROM ledger_pruned WHERE key = %s"
                return self._conn.execute(sql, (key,)).fetchone() is not None

    def count_pruned(self) -> int:
        with self._lock:
            self._check_open()
            with self._errors("count"):
                row = self._conn.execute("SELECT count(*) FROM ledger_pruned").fetchone()
        return int(row[0]) if row is not None else 0

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (SPEC §8.1; stores/sql/schedules.py)."""
        if not codec.is_utf8(key):
            return None
        with self._lock:
            self._check_open()
            with self._errors("schedule"):
                row = self._conn.execute(
                    schedules.sql(schedules.SELECT_ONE, "%s"), (key,)
                ).fetchone()
        return schedules.value_of(*row) if row is not None else None

    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        _no_nul(key)
        with self.batch(), self._lock, self._errors("schedule"):
            if value is None:
                self._conn.execute(schedules.sql(schedules.DELETE, "%s"), (key,))
            else:
                args = (key, *schedules.params(value))
                self._conn.execute(schedules.sql(schedules.UPSERT, "%s"), args)

    def schedules(self) -> dict[str, tuple[Instant, int]]:
        with self._lock:
            self._check_open()
            with self._errors("schedule"):
                rows = self._conn.execute(schedules.SELECT_ALL).fetchall()
        return {str(k): schedules.value_of(nb, p) for k, nb, p in rows}

    def has_schedules(self) -> bool:
        with self._lock:
            self._check_open()
            with self._errors("schedule"):
                row = self._conn.execute(schedules.ANY).fetchone()
        return bool(row and row[0])

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        """The pause (SPEC §8.3; stores/sql/pause.py). A `--next` claim reads the
        row FOR SHARE in its transaction, so `pause`'s UPDATE waits for it."""
        with self._lock:
            self._check_open()
            if not (for_claim and self._depth):
                with self._errors("pause"):
                    row = self._conn.execute(pause.READ).fetchone()
                return pause.state_of(row)
            with self._errors("pause"):
                row = self._conn.execute(_CLAIM_START).fetchone()
            if row is None:
                return None
            self._claim_start = (
                Instant.from_datetime(row[4]).utc(),
                None if row[5] is None else int(row[5]),
            )
        return pause.state_of(row[:4])

    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        with self.batch(), self._lock, self._errors("pause"):
            self._conn.execute(pause.WRITE_PG, pause.params(state))

    def status_counts(self) -> dict[str, int]:
        """Unpruned records by status, counted in SQL (`ledger stats`)."""
        with self._lock:
            self._check_open()
            with self._errors("count"):
                rows = self._conn.execute(readyindex.STATUS_COUNTS_SQL).fetchall()
        return {str(status): int(n) for status, n in rows}

    def check_ready_index(self) -> list[str]:
        """Problems of the ready index against `ledger_tasks` (`ledger doctor`)."""
        with self._lock:
            self._check_open()
            with self._errors("ready index check"):
                return [
                    f"ready index: {what}: {row[0]!r}"
                    for what, sql in (*readyindex.PG_CHECKS, *postgres_due.CHECKS)
                    for row in self._conn.execute(sql + " LIMIT 20").fetchall()
                ]

    def rebuild_ready_index(self) -> None:
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`)."""
        with self.batch(), self._errors("ready index rebuild"):
            self._conn.execute("LOCK TABLE ledger_tasks IN SHARE ROW EXCLUSIVE MODE")
            for ddl in (
                *readyindex.PG_DDL,
                *readyindex.PG_REBUILD,
                *postgres_due.DDL,
                *postgres_due.REBUILD,
            ):
                self._conn.execute(ddl)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction for the block; nested blocks are savepoints.

        An exception rolls back the block it leaves. Rows written in a batch stay
        locked until it ends, so keep batches short.
        """
        with self._lock:
            self._check_open()
            self._depth += 1
            done = False
            tx: contextlib.AbstractContextManager[Any]
            if self._pipeline is None:
                tx = self._conn.transaction()
            elif (
                self._depth == 1
            ):  # BEGIN and COMMIT ride with statements (stores/sql/postgres_tx.py)
                tx = self._pipeline.transaction()
            else:
                tx = self._pipeline.savepoint(self._depth)
            try:
                with self._errors("commit"), tx:
                    yield
                done = True
            finally:
                self._depth -= 1
                if self._depth < self._blocks_depth:  # committed, or its savepoint left
                    self._blocks_depth = 0
                if not done or self._depth == 0:
                    self._held.clear()  # rolled back, or the locks are gone
                    self._claim_start = None
                    self._preloaded.clear()

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

    def now_with(self, key: str) -> Instant:
        """`now()`, and inside a batch the row of `key` read with it (the clock
        as the statement starts, then the row, as a unit reading its clock and
        then its record would: one statement). The row is kept for the next
        `load(key)` in this batch, which costs nothing then. Outside a batch,
        or for a key no row can have: `now()` alone."""
        if not codec.is_utf8(key) or "\x00" in key:
            return self.now()  # load() answers (or refuses) such a key itself
        with self._lock:
            self._check_open()
            if not self._depth:
                return self.now()
            with self._errors("clock"):
                row = self._conn.execute(_CLOCKED_LOAD, (key,)).fetchone()
            now = self._instant(row)
            assert row is not None  # (_instant refuses a missing row)
            if key not in self._held:
                self._preloaded[key] = None if row[1] is None else codec.row_to_state(row[1:])
        return now

    # -- History -----------------------------------------------------------------

    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        if not entries:
            return
        params = []
        for e in entries:
            _no_nul(e.key, actor=e.actor, event=e.event, data=e.data, time=e.time)
            fence = codec.check_uint(e.fence, "fence", e.key)
            params.append((e.time, e.actor, e.event, e.key, fence, e.data))
        # Inside a batch (a write's history) the entries join its transaction
        # as they are: a savepoint would cost two round trips and save nothing,
        # since a failure here fails the whole batch anyway.
        with self._lock, contextlib.ExitStack() as stack:
            if self._depth == 0:
                stack.enter_context(self.batch())
            with self._errors("history insert"):
                self._check_open()
                if len(params) == 1:  # executemany pipelines: costlier for one row
                    self._conn.execute(_HISTORY_INSERT, params[0])
                else:
                    with self._conn.cursor() as cur:
                        cur.executemany(_HISTORY_INSERT, params)

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """Oldest first; read in pages by id, so a long log is never held whole."""
        if key is not None and "\x00" in key:
            return

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                with self._errors("history read"):
                    return list(self._conn.execute(sql, args).fetchall())

        yield from codec.read_history_pages(fetch, "%s", key)

    # -- blocks and un-blocks (SPEC §6.2; engine/serial.py) ----------------------

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

    def close(self) -> None:
        # A thread blocked on a stalled connection holds the lock: do not wait
        # for it (the process is ending; the socket goes with it).
        if not self._lock.acquire(timeout=_CLOSE_WAIT):
            self._closed = True
            return
        try:
            if self._closed:
                return
            self._closed = True
            if self._conn.broken:
                with contextlib.suppress(Exception):
                    self._conn.close()
                return
            with self._errors("close"):
                self._conn.close()
        finally:
            self._lock.release()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r})"
