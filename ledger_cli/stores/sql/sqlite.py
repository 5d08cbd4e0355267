"""SQLiteStore: a Store in an SQLite database the Go service can share (docs/design.md §3.3).

The table is the Go `SQLiteStore`'s `ledger_tasks` (docs/design.md §3.3): same
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

The class supplies its dialect (dialect.py) to the groups shared with
PostgreSQL (claims.py, reads.py, sidetables.py: stores/sql/__init__.py maps
them), over the connection base (sqlite_conn.py); the schema and its
migration are sqlite_schema.py's (GO_DDL is re-exported here). What stays
here is the Store's core: `load`, the compare-and-swap and history writes,
the named-queue scan and `ready_apart` (keys that are not valid UTF-8, which
SQLite can hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, ddl, due, queues, readyindex, sqlite_schema
from ledger_cli.stores.sql.claims import SqlClaims
from ledger_cli.stores.sql.reads import SqlReads
from ledger_cli.stores.sql.sidetables import SqlSideTables
from ledger_cli.stores.sql.sqlite_conn import DRIVER_ERRORS, SQLiteConnection
from ledger_cli.stores.sql.sqlite_schema import GO_DDL

__all__ = ["GO_DDL", "SQLiteStore"]

_LOAD, _INSERT, _UPDATE, _HISTORY_INSERT = codec.core_sql("?", "max")
_HISTORY_MORE = ", (?, ?, ?, ?, ?, ?)"
_HISTORY_ROWS = 500
"""History rows a statement inserts at most (6 parameters each: SQLite takes 32,766)."""
_READY_ODD_KEYS = (
    "SELECT t.key FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
    f" WHERE {readyindex.FREE} AND t.key GLOB '*[^ -~]*'"
)
"""The FREE candidates whose key holds anything but printable ASCII: a superset
of the keys that are not valid UTF-8 (`ready_apart`)."""


class SQLiteStore(SQLiteConnection, SqlClaims, SqlReads, SqlSideTables):
    """A Store over an SQLite file (or `":memory:"`), shareable with the Go service.

    `busy_timeout` (seconds) is how long a write waits for another writer
    (the Go store uses 5 s) before failing with StoreError. Thread-safe: one
    connection guarded by a lock; `batch()` holds it for the block.
    """

    # -- the dialect (dialect.py) ------------------------------------------------

    MARK = "?"
    KEY_ORDER = "ORDER BY key"
    IN_MAX = 500
    GAP_WAIT = 0.0
    INDEX_DDL = sqlite_schema.INDEX_DDL
    INDEX_CHECKS = sqlite_schema.CHECKS
    INDEX_REBUILD_RANGE = sqlite_schema.REBUILD_RANGE
    REBUILD_GAP = 0.12
    """Longer than one busy-handler poll: waiting writers get in (cli/chunks.py GAP)."""
    LEASE = ddl.SQLITE.sortkey("t.lease_until")
    READY_PAGE = 4
    """A claim mostly takes the first candidate it reads (the scan leaves out
    live leases): a page of 16 read (and converted) 12 rows for nothing."""

    def _in(self, column: str, values: tuple[str, ...]) -> tuple[str, tuple[Any, ...]]:
        return f"{column} IN ({', '.join('?' * len(values))})", values

    def _queue_tables(self) -> bool:
        rows = self._fetchall("queue", queues.EXISTS, (queues.QUEUE_TABLE, queues.LIMIT_TABLE))
        return bool(rows and rows[0][0] == 2)

    def _make_queue_tables(self) -> None:
        for stmt in ddl.queues(ddl.SQLITE):
            self._conn.execute(stmt)

    def _revoked_table(self) -> bool:
        rows = self._fetchall("queue", queues.REVOKED_EXISTS, (queues.REVOKED_TABLE,))
        return bool(rows and rows[0][0])

    def _queue_page_sql(self, *, lock: bool, limit: int, queues: int) -> str:
        """Driven from `ledger_queue`'s (queue, key) index (CROSS JOIN keeps that
        order of the loops): it reads those queues' rows, however many tasks of
        other queues sort before them, where the (rank, due, key) walk would
        step over every one."""
        return (
            f"SELECT {codec.T_COLUMNS}, d.due FROM ledger_queue q CROSS JOIN ledger_due d"
            f" CROSS JOIN ledger_tasks t WHERE q.queue IN ({', '.join('?' * queues)}) AND d.key"
            f" = q.key AND t.key = d.key AND {due.level_sql('?', self.LEASE, limit=limit)}"
        )

    def ready_apart(self) -> int:
        """How many pending candidates naming no needs have a key that is not
        valid UTF-8 (the Go service's bytes): a GLOB in SQL finds the keys with
        any byte outside printable ASCII (few), Python judges those."""
        rows = self._rows("ready count", _READY_ODD_KEYS)
        keys = (codec.read_text(row[0], "(ready)", "key") for row in rows)
        return sum(not codec.is_utf8(key) for key in keys)

    # -- Store -------------------------------------------------------------------

    def load(self, key: str) -> TaskState | None:
        with self._lock:
            if self._closed:
                self._check_open()
            seen = self._seen
            if seen is not None and key in seen:
                return seen[key]  # read in this transaction, unchanged since
            try:
                row = self._cur.execute(_LOAD, (key,)).fetchone()
            except DRIVER_ERRORS as exc:
                if isinstance(exc, UnicodeEncodeError) and not codec.spells_bytes(key):
                    return None  # no row holds it (`a\ud800`): as on the other stores
                row = self._retry("load", exc, _LOAD, (key,), one=True)
            if row is None:
                return None
            rec = codec.row_to_state(row)
            if seen is not None:
                seen[key] = rec
            return rec

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
            if self._seen is not None:
                self._seen = {}  # a row changes: what was read is read again
            try:
                return self._cur.execute(sql, params).rowcount == 1
            except DRIVER_ERRORS as exc:
                self._retry(op, exc, sql, params)
                return self._cur.rowcount == 1

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
        with self._lock:
            if self._depth and len(params) <= _HISTORY_ROWS:
                # one statement in the caller's transaction: all its rows or none
                self._insert_history(params)
                return
            with self.batch():
                for at in range(0, len(params), _HISTORY_ROWS):
                    self._insert_history(params[at : at + _HISTORY_ROWS])

    def _insert_history(self, params: list[tuple[Any, ...]]) -> None:
        """Insert history rows, in order, with one statement."""
        sql = _HISTORY_INSERT + _HISTORY_MORE * (len(params) - 1)
        try:
            self._conn.execute(sql, [value for row in params for value in row])
        except UnicodeEncodeError:
            # A key or text holding invalid bytes: bind those rows as bytes,
            # one by one, in a savepoint (all of them go in, or none).
            with self.batch(), self._errors("history insert"):
                for row in params:
                    self._conn.execute(*codec.raw_binding(_HISTORY_INSERT, row))
        except DRIVER_ERRORS as exc:
            raise self._error("history insert", exc) from None
