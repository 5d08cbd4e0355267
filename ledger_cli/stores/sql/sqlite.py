"""SQLiteStore: a Store in an SQLite database the Go service can share (SPEC §3.3).

The table is the Go `SQLiteStore`'s `ledger_tasks` (spec/engine.md §7): same
columns, types, defaults and encodings, same idempotent column migration, WAL
and a busy timeout. So `ledger --store app.db …` inspects and operates the very
file a running Go service uses, concurrently with it. What this store adds is
compatible with the Go store:
- an index on (status, created_at, key) for the claimable-work scan
  (`by_status`), and a `ledger_history` table (the Go store ignores both);
- departure 4: a nil Needs is written as `null`, an empty one as `[]`.

Durability: the Go store runs `synchronous=NORMAL` (in WAL mode a commit may be
lost on power failure, never corrupted). Ours promises that every write is
durable before the call returns, so its connections use `synchronous=FULL`:
each commit fsyncs the WAL. `batch()` makes many writes one transaction, one
fsync. The setting is per connection; the Go service's connections keep theirs.

Compare-and-swap is one statement whose row count decides: `INSERT … ON
CONFLICT(key) DO NOTHING` for an insert (rev 0), or `UPDATE … SET …, rev = rev
+ 1 WHERE key=? AND sequence=? AND status=? AND fence=? AND rev=?`, which, as
the Go store's, never writes created_at/created_by.

Text that is not valid UTF-8 (the Go service writes Go strings, which are bytes)
affects only its own row: reads use the driver's fast str decoding until a
value fails to decode, then switch this connection to `codec.lossless_text`
(each invalid byte a lone surrogate, shown as U+FFFD as Go's encoder shows
it); a value holding such bytes is bound back as those exact bytes
(`CAST(? AS TEXT)`), so an operation on that row is byte-exact.

Sequences, fences and revs are SQLite INTEGERs (signed 64-bit), as in Go; a
value above 2^63-1 (which the Go store cannot write either) is a StoreError.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.errors import StoreError, StoreUnavailableError
from ledger_cli.stores.sql import codec, pause, readyindex, schedules, sqlite_due

__all__ = ["GO_DDL", "SQLiteStore"]

GO_DDL = """CREATE TABLE IF NOT EXISTS ledger_tasks (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    fence INTEGER NOT NULL DEFAULT 0,
    lease_until TEXT NOT NULL DEFAULT '',
    needs TEXT NOT NULL DEFAULT '[]',
    blocked_by TEXT NOT NULL DEFAULT '',
    task BLOB,
    rev INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    updated_by TEXT NOT NULL DEFAULT ''
)"""
"""The Go store's table (spec/engine.md §7), column for column."""

_EXTRA_DDL = (
    "CREATE INDEX IF NOT EXISTS ledger_tasks_claimable ON ledger_tasks (status, created_at, key)",
    "CREATE TABLE IF NOT EXISTS ledger_history ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " time TEXT NOT NULL,"
    " actor TEXT NOT NULL,"
    " event TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " fence INTEGER NOT NULL,"
    " data TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ledger_history_key ON ledger_history (key, id)",
    *pause.SQLITE_DDL,
    *schedules.SQLITE_DDL,
)

_LOAD = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE key = ?"
_RANGE = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks ORDER BY key"
_INSERT = (
    "INSERT INTO ledger_tasks (key, status, sequence, owner, fence, lease_until, needs,"
    " blocked_by, task, rev, created_at, updated_at, created_by, updated_by)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?) ON CONFLICT(key) DO NOTHING"
)
_UPDATE = (
    "UPDATE ledger_tasks SET status = ?, sequence = ?, owner = ?, fence = ?, lease_until = ?,"
    " needs = ?, blocked_by = ?, task = ?, rev = rev + 1, updated_at = ?, updated_by = ?"
    " WHERE key = ? AND sequence = ? AND status = ? AND fence = ? AND rev = ?"
)
_HISTORY_INSERT = f"INSERT INTO ledger_history ({codec.HISTORY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
_DRIVER_ERRORS = (sqlite3.Error, UnicodeError, OverflowError)
_UNDECODABLE = "could not decode to utf-8"
_READY_ODD_KEYS = (
    "SELECT t.key FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
    f" WHERE {readyindex.FREE} AND t.key GLOB '*[^ -~]*'"
)
"""The FREE candidates whose key holds anything but printable ASCII: a superset
of the keys that are not valid UTF-8 (`ready_apart`)."""


class SQLiteStore:
    """A Store over an SQLite file (or `":memory:"`), shareable with the Go service.

    `busy_timeout` (seconds) is how long a write waits for another writer
    (the Go store uses 5 s) before failing with StoreError. Thread-safe: one
    connection guarded by a lock; `batch()` holds it for the block.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 5.0) -> None:
        self._path = os.fspath(path)
        self._busy_timeout = busy_timeout
        self._lock = threading.RLock()
        self._depth = 0
        self._closed = False
        try:
            self._conn = sqlite3.connect(
                self._path,
                timeout=busy_timeout,
                isolation_level=None,  # autocommit: transactions are explicit
                check_same_thread=False,
                cached_statements=64,
            )
        except sqlite3.Error as exc:
            raise self._error("open", exc) from None
        self._cur = self._conn.cursor()  # reused by the hot paths (load, CAS)
        try:
            self._setup()
        except BaseException:
            self._conn.close()
            self._closed = True
            raise

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
            except _DRIVER_ERRORS as exc:
                locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                if not locked or time.monotonic() + backoff > deadline:
                    raise self._error("pragma", exc) from None
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.1)
        with self._errors("create ledger_tasks table"):
            if not self._schema_complete():
                self._migrate()

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

    def _schema_complete(self) -> bool:
        cols = {row[1] for row in self._conn.execute("PRAGMA table_info(ledger_tasks)")}
        if not set(codec.ALL_COLUMNS) <= cols:
            return False
        names = {
            row[0]
            for row in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE name IN (?, ?, ?, ?, ?)",
                (
                    codec.CLAIMABLE_INDEX,
                    codec.HISTORY_TABLE,
                    codec.HISTORY_INDEX,
                    pause.TABLE,
                    schedules.TABLE,
                ),
            )
        }
        return len(names) == 5 and self._ready_installed()

    def _ready_installed(self) -> bool:
        names = (*readyindex.SQLITE_OBJECTS, *sqlite_due.OBJECTS)
        marks = ", ".join("?" for _ in names)
        found = self._conn.execute(
            f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", names
        ).fetchone()[0]
        return bool(found == len(names))

    def _due_installed(self) -> bool:
        marks = ", ".join("?" for _ in sqlite_due.OBJECTS)
        found = self._conn.execute(
            f"SELECT count(*) FROM sqlite_master WHERE name IN ({marks})", sqlite_due.OBJECTS
        ).fetchone()[0]
        return bool(found == len(sqlite_due.OBJECTS))

    def _migrate(self) -> None:
        """The Go store's create-and-migrate, plus our index and history table.

        All in one BEGIN IMMEDIATE transaction, so concurrent openers (and a Go
        service migrating at the same time) serialise; every step is idempotent.
        """
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(GO_DDL)
            cols = {row[1] for row in conn.execute("PRAGMA table_info(ledger_tasks)")}
            for name in codec.MIGRATED_COLUMNS:
                if name not in cols:
                    conn.execute(
                        f"ALTER TABLE ledger_tasks ADD COLUMN {name} TEXT NOT NULL DEFAULT ''"
                    )
                    cols.add(name)
            missing = [c for c in codec.ALL_COLUMNS if c not in cols]
            if missing:
                raise StoreError(
                    f"ledger: sqlite store {self._path}: table ledger_tasks lacks column(s) "
                    f"{', '.join(missing)}; this is not a ledger database"
                )
            for ddl in _EXTRA_DDL:
                conn.execute(ddl)
            if not self._ready_installed():  # the ready index (SPEC §6.1), built once
                # The order of SPEC §8.2 (ledger_due) first, so that it follows
                # every ledger_ready row the rebuild writes; a ledger_ready of an
                # older release is rebuilt by the first opener that migrates.
                due_missing = not self._due_installed()
                for ddl in sqlite_due.DDL[:2]:
                    conn.execute(ddl)
                for ddl in (*readyindex.SQLITE_TABLES, *readyindex.SQLITE_TRIGGERS):
                    conn.execute(ddl)
                for ddl in sqlite_due.DDL[2:]:
                    conn.execute(ddl)
                for sql in readyindex.SQLITE_REBUILD:
                    conn.execute(sql)
                if due_missing:
                    for sql in sqlite_due.REBUILD:
                        conn.execute(sql)
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

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

    @contextlib.contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except _DRIVER_ERRORS as exc:
            raise self._error(op, exc) from None

    def _fetchall(self, op: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            return self._conn.execute(sql, params).fetchall()
        except _DRIVER_ERRORS as exc:
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
            except _DRIVER_ERRORS as again:
                exc = again

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"ledger: sqlite store {self._path} is closed")

    # -- Store -------------------------------------------------------------------

    def load(self, key: str) -> TaskState | None:
        with self._lock:
            if self._closed:
                self._check_open()
            try:
                row = self._cur.execute(_LOAD, (key,)).fetchone()
            except _DRIVER_ERRORS as exc:
                row = self._retry("load", exc, _LOAD, (key,), one=True)
        return None if row is None else codec.row_to_state(row)

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        if old is None:
            params = codec.insert_params(key, new, codec.INT64_MAX)
            sql, op = _INSERT, "insert"
        else:
            if not codec.tuple_fits(old, codec.INT64_MAX):
                return False
            params = codec.update_params(key, old, new, codec.INT64_MAX)
            sql, op = _UPDATE, "update"
        with self._lock:
            if self._closed:
                self._check_open()
            try:
                return self._cur.execute(sql, params).rowcount == 1
            except _DRIVER_ERRORS as exc:
                self._retry(op, exc, sql, params)
                return self._cur.rowcount == 1

    def range(self) -> Iterator[TaskState]:
        """Every record sorted by key (UTF-8 bytes), read in one statement (one snapshot)."""
        with self._lock:
            self._check_open()
            rows = self._fetchall("range", _RANGE, ())
        records = [codec.row_to_state(row) for row in rows]
        if not self._utf8:  # BINARY collation compares the database's encoding
            records.sort(key=lambda r: byte_order(r.key))
        return iter(records)

    def by_status(self, statuses: Iterable[str]) -> list[TaskState]:
        """Records whose status is one of `statuses`, oldest CreatedAt first, then key.

        Served by the (status, created_at, key) index, so the claimable-work scan
        (`by_status(("pending", "claimed"))`) reads live records only.
        """
        wanted = list(dict.fromkeys(statuses))
        if not wanted:
            return []
        marks = ", ".join("?" for _ in wanted)
        sql = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE status IN ({marks})"
        with self._lock:
            self._check_open()
            rows = self._fetchall("scan", sql, tuple(wanted))
        return codec.claimable_order(codec.row_to_state(row) for row in rows)

    def by_status_head(self, statuses: Iterable[str], limit: int) -> list[TaskState]:
        """The first `limit` records whose status is one of `statuses`, in key
        order (UTF-8 bytes), sorted in the database (`watch` draws no more)."""
        wanted = list(dict.fromkeys(statuses))
        if not wanted or limit <= 0:
            return []
        if not self._utf8:  # BINARY collation is not UTF-8 byte order here
            return sorted(self.by_status(wanted), key=lambda r: byte_order(r.key))[:limit]
        marks = ", ".join("?" for _ in wanted)
        sql = (
            f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE status IN ({marks})"
            " ORDER BY key LIMIT ?"
        )
        return self._records(sql, (*wanted, limit))

    def blocked_by_keys(self) -> list[str]:
        """The keys blocked records are blocked by, each once (`watch`'s failed roots)."""
        sql = "SELECT DISTINCT blocked_by FROM ledger_tasks WHERE status = 'blocked'"
        with self._lock:
            self._check_open()
            rows = self._fetchall("scan", sql, ())
        return [codec.read_text(row[0], "(blocked by)", "blocked_by") for row in rows]

    orders_schedules = True
    """`ready_candidates` yields the Ready order of SPEC §8.2 and leaves out tasks
    not yet due (stores/sql/sqlite_due.py): cli/ready.py needs no scan."""

    def ready_candidates(self, now: Instant | None = None) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed and
        that are due, in Ready order (priority, due, key), read through the
        trigger-kept `ledger_due` table."""
        query = sqlite_due.page_sql(codec.SELECT_COLUMNS, readyindex.SQLITE_LEASE)
        at = readyindex.sortable(now)

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                return list(self._fetchall("ready scan", sql, args))

        return sqlite_due.candidates(fetch, query, at)

    def ready_split(self, now: Instant) -> tuple[int, TaskState | None, Iterator[TaskState]]:
        """`ledger stats`' ready figures with the counting done in SQL: how many
        pending candidates name no needs (each one is ready), the first of them
        in Ready order, and every other candidate (claimed, or naming needs;
        in Ready order) for the caller to judge by the Ready rule.
        A key that is not valid UTF-8 (the Go service's bytes) is left out of
        the count and the first, as `claim --next` never hands one out
        (`ready_apart` counts them)."""
        with self._lock:
            self._check_open()
            ((free,),) = self._fetchall("ready count", readyindex.FREE_COUNT, ())
        pages = self._ready_pages(now, readyindex.FREE)
        first = next((r for r in pages if codec.is_utf8(r.key)), None)
        return int(free) - self.ready_apart(), first, self._ready_pages(now, readyindex.NOT_FREE)

    def ready_apart(self) -> int:
        """How many pending candidates naming no needs have a key that is not
        valid UTF-8: a GLOB in SQL finds the keys with any byte outside
        printable ASCII (few), Python judges those."""
        with self._lock:
            self._check_open()
            rows = self._fetchall("ready count", _READY_ODD_KEYS, ())
        keys = (codec.read_text(row[0], "(ready)", "key") for row in rows)
        return sum(not codec.is_utf8(key) for key in keys)

    def _ready_pages(self, now: Instant | None, only: str | None) -> Iterator[TaskState]:
        sql = readyindex.page_sql(
            codec.SELECT_COLUMNS, "?", readyindex.SQLITE_LEASE, lock=False, only=only
        )
        at = readyindex.sortable(now)

        def fetch(created: str, key: str, limit: int) -> list[Any]:
            with self._lock:
                self._check_open()
                return list(self._fetchall("ready scan", sql, (created, key, at, limit)))

        return readyindex.candidates(fetch, 16)

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
                                "INSERT OR IGNORE INTO ledger_pruned (key) VALUES (?)", (old.key,)
                            )
                            self._conn.execute(
                                "DELETE FROM ledger_history WHERE key = ?", (old.key,)
                            )
                        done += 1
        return done

    def _records(self, sql: str, args: tuple[Any, ...] = ()) -> list[TaskState]:
        with self._lock:
            self._check_open()
            rows = self._fetchall("scan", sql, args)  # lossless text on a bad value
        records = [codec.row_to_state(row) for row in rows]
        if not self._utf8:
            records.sort(key=lambda r: byte_order(r.key))
        return records

    def dependents(self, keys: Iterable[str]) -> list[TaskState]:
        """The records naming any of `keys` in their needs (engine
        `dependents_walk`), through the trigger-kept `ledger_needs` table
        (every record's needs, indexed by need), 500 keys a statement."""
        wanted = list(dict.fromkeys(keys))
        found: list[TaskState] = []
        for at in range(0, len(wanted), 500):
            part = tuple(wanted[at : at + 500])
            marks = ", ".join("?" * len(part))
            sql = (
                f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE key IN"
                f" (SELECT key FROM ledger_needs WHERE need IN ({marks}))"
            )
            found += self._records(sql, part)
        return found

    def visible_range(self) -> Iterator[TaskState]:
        """Every record but the pruned ones, sorted by key, read in pages of 1000
        (keyset): `list` prints its first rows at once, in constant memory."""
        if not self._utf8:  # key order is not byte order: one sorted read
            yield from self._records(readyindex.visible_sql(codec.SELECT_COLUMNS))
            return
        sql = readyindex.visible_page_sql(codec.SELECT_COLUMNS, "?")
        yield from codec.read_record_pages(self._records, sql)

    def pruned_range(self) -> Iterator[TaskState]:
        """The pruned records, sorted by key."""
        return iter(self._records(readyindex.pruned_sql(codec.SELECT_COLUMNS)))

    def is_pruned(self, key: str) -> bool:
        with self._lock:
            self._check_open()
            sql = "SELECT 1 FROM ledger_pruned WHERE key = ?"
            try:
                row = self._cur.execute(sql, (key,)).fetchone()
            except _DRIVER_ERRORS as exc:  # a key holding bytes that are not UTF-8
                row = self._retry("load", exc, sql, (key,), one=True)
            return row is not None

    def count_pruned(self) -> int:
        with self._lock:
            self._check_open()
            with self._errors("count"):
                row = self._conn.execute("SELECT count(*) FROM ledger_pruned").fetchone()
        return int(row[0]) if row is not None else 0

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (SPEC §8.1; stores/sql/schedules.py)."""
        with self._lock:
            self._check_open()
            one = schedules.sql(schedules.SELECT_ONE, "?")
            rows = self._fetchall("schedule", one, (key,))
        return schedules.value_of(*rows[0]) if rows else None

    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        with self.batch(), self._lock, self._errors("schedule"):
            if value is None:
                self._conn.execute(schedules.sql(schedules.DELETE, "?"), (key,))
            else:
                args = (key, *schedules.params(value))
                self._conn.execute(schedules.sql(schedules.UPSERT, "?"), args)

    def schedules(self) -> dict[str, tuple[Instant, int]]:
        with self._lock:
            self._check_open()
            rows = self._fetchall("schedule", schedules.SELECT_ALL, ())
        return {str(k): schedules.value_of(nb, p) for k, nb, p in rows}

    def has_schedules(self) -> bool:
        with self._lock:
            self._check_open()
            rows = self._fetchall("schedule", schedules.ANY, ())
        return bool(rows and rows[0][0])

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        """The pause (SPEC §8.3; stores/sql/pause.py); a `--next` claim reads it in
        its BEGIN IMMEDIATE batch, which `pause` cannot interleave with."""
        with self._lock:
            self._check_open()
            rows = self._fetchall("pause", pause.READ, ())
        return pause.state_of(rows[0] if rows else None)

    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        with self.batch(), self._lock, self._errors("pause"):
            self._conn.execute(pause.WRITE_SQLITE, pause.params(state))

    def status_counts(self) -> dict[str, int]:
        """Unpruned records by status, counted in SQL (`ledger stats`)."""
        with self._lock:
            self._check_open()
            rows = self._fetchall("count", readyindex.STATUS_COUNTS_SQL, ())
        return {str(status): int(n) for status, n in rows}

    def check_ready_index(self) -> list[str]:
        """Problems of the ready index against `ledger_tasks` (`ledger doctor`)."""
        with self._lock:
            self._check_open()
            with self._errors("ready index check"):
                return [
                    f"ready index: {what}: {row[0]!r}"
                    for what, sql in (*readyindex.SQLITE_CHECKS, *sqlite_due.CHECKS)
                    for row in self._conn.execute(sql + " LIMIT 20").fetchall()
                ]

    def rebuild_ready_index(self) -> None:
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`)."""
        with self.batch(), self._errors("ready index rebuild"):
            for ddl in (*readyindex.SQLITE_TABLES, *readyindex.SQLITE_TRIGGERS, *sqlite_due.DDL):
                self._conn.execute(ddl)
            for sql in (*readyindex.SQLITE_REBUILD, *sqlite_due.REBUILD):
                self._conn.execute(sql)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction for the block (BEGIN IMMEDIATE … COMMIT, one fsync).

        Re-entrant: a nested block is a savepoint. An exception rolls back the
        block it leaves (and, unless caught inside, the outer ones).
        """
        with self._lock:
            self._check_open()
            depth = self._depth
            savepoint = f"ledger_batch_{depth}"
            with self._errors("begin"):
                self._conn.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT {savepoint}")
            self._depth = depth + 1
            try:
                yield
            except BaseException:
                self._depth = depth
                with contextlib.suppress(sqlite3.Error):
                    if depth == 0:
                        self._conn.execute("ROLLBACK")
                    else:
                        self._conn.execute(f"ROLLBACK TO {savepoint}")
                        self._conn.execute(f"RELEASE {savepoint}")
                raise
            self._depth = depth
            try:
                with self._errors("commit"):
                    self._conn.execute("COMMIT" if depth == 0 else f"RELEASE {savepoint}")
            except StoreError:
                if depth == 0 and self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.execute("ROLLBACK")
                raise

    # -- History -----------------------------------------------------------------

    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        if not entries:
            return
        params = [
            (
                e.time,
                e.actor,
                e.event,
                e.key,
                codec.check_uint(e.fence, "fence", e.key, codec.INT64_MAX),
                e.data,
            )
            for e in entries
        ]
        with self.batch():
            try:
                self._conn.executemany(_HISTORY_INSERT, params)
            except UnicodeEncodeError:
                # A key or text holding invalid bytes: bind those rows as bytes.
                with self._errors("history insert"):
                    for row in params:
                        self._conn.execute(*codec.raw_binding(_HISTORY_INSERT, row))
            except _DRIVER_ERRORS as exc:
                raise self._error("history insert", exc) from None

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """Oldest first; read in pages by id, so a long log is never held whole."""

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                return self._fetchall("history read", sql, args)

        yield from codec.read_history_pages(fetch, "?", key)

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with self._errors("close"):
                self._conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"
