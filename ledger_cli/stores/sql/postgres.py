"""PostgresStore: the SQL store for workers on several hosts (docs/design.md §3.4).

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

The class supplies its dialect (dialect.py) to the groups shared with SQLite
(claims.py, reads.py, sidetables.py: stores/sql/__init__.py maps them), over
the connection base (postgres_conn.py); the schema and its set-up are
postgres_schema.py's. What stays here is what only PostgreSQL does on the
claim path (the hooks that read the server's clock without a round trip of
its own, `now_with` and `ready_at_clock`; the pause read FOR SHARE by a
`--next` claim together with the clock, the first priority level and the
queues' limits; the named queues' candidates read through a MATERIALIZED
CTE), `lock_limit`, and the Store's core: `load`, the compare-and-swap
writes and history writes.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.rerun import rerun
from ledger_cli.errors import StoreError
from ledger_cli.stores.sql import codec, ddl, due, historyfollow, pause, postgres_schema, queues
from ledger_cli.stores.sql.claims import SqlClaims
from ledger_cli.stores.sql.postgres_conn import PostgresConnection
from ledger_cli.stores.sql.reads import SqlReads
from ledger_cli.stores.sql.sidetables import SqlSideTables

if TYPE_CHECKING:
    from ledger_cli.engine.queuefilter import Filter as QueueFilter

__all__ = ["PostgresStore"]

# Both writes return the row they wrote (no second round trip to read it back).
_LOAD, _INSERT, _UPDATE, _HISTORY_INSERT = codec.core_sql(
    "%s", "greatest", f" RETURNING {codec.SELECT_COLUMNS}"
)

# The server's clock and a key's row in one statement (a row even for a key
# with no record): statement_timestamp() is read as the statement starts, so
# before the row's snapshot is taken, as reading the clock and then the record.
_CLOCKED_LOAD = (
    f"SELECT statement_timestamp(), {codec.T_COLUMNS}"
    " FROM (SELECT 1) c LEFT JOIN ledger_tasks t ON t.key = %s"
)
_CLAIM_START = (
    "SELECT paused, since, actor, reason, clock_timestamp(),"
    " (SELECT min(rank) FROM ledger_due WHERE rank > -1000001),"
    " (SELECT coalesce(json_object_agg(queue, n), '{}') FROM ledger_limit)"
    " FROM ledger_pause WHERE id = 1 FOR SHARE"
)
"""A `--next` claim's first statement: the pause (read FOR SHARE, docs/design.md §8.3), the
server's clock, the first priority level of the due index (docs/design.md §8.2) and the
queues' limits (docs/design.md §8.7), in one round trip."""


def _state_fields(rec: TaskState) -> dict[str, str]:
    return {
        "status": rec.status,
        "owner": rec.owner,
        "blocked_by": rec.blocked_by,
        "created_by": rec.created_by,
        "updated_by": rec.updated_by,
    }


class PostgresStore(PostgresConnection, SqlClaims, SqlReads, SqlSideTables):
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

    # -- the dialect (dialect.py) ------------------------------------------------

    MARK = "%s"
    KEY_ORDER = 'ORDER BY key COLLATE "C"'
    IN_MAX = 1 << 20  # one array parameter (`= ANY(%s)`): no statement-size limit
    GAP_WAIT = historyfollow.PG_GAP_WAIT
    _utf8 = True  # keys are `text COLLATE "C"`: byte order
    INDEX_DDL = (*postgres_schema.READY_DDL, *postgres_schema.DUE_DDL)
    INDEX_CHECKS = postgres_schema.CHECKS
    INDEX_REBUILD_RANGE = postgres_schema.REBUILD_RANGE
    REBUILD_LOCK = "LOCK TABLE ledger_tasks IN SHARE ROW EXCLUSIVE MODE"
    REBUILD_GAP = 0.0  # waiting writers queue on the lock
    LEASE = ddl.PG.sortkey("t.lease_until")

    def _fetchall(self, op: str, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._errors(op):
            return list(self._conn.execute(sql, params or None).fetchall())

    def _in(self, column: str, values: tuple[str, ...]) -> tuple[str, tuple[Any, ...]]:
        return f"{column} = ANY(%s)", (list(values),)

    def _holds(self, text: str) -> bool:
        return "\x00" not in text and codec.is_utf8(text)

    def _check_text(self, key: str, **fields: str) -> None:
        """A key that is not valid UTF-8, or a key or text field holding NUL,
        is refused: PostgreSQL text cannot hold either."""
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

    # -- the claim path (claims.py does the rest) -----------------------------------

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

    def _queue_page_sql(self, *, lock: bool, limit: int, queues: int) -> str:
        """Their keys are read first from `ledger_queue`'s (queue, key) index (a
        MATERIALIZED CTE: the planner cannot turn it back into the (rank, due,
        key) walk that steps over every other queue's task), then joined to
        their `ledger_due` rows."""
        sql = (
            "WITH q AS MATERIALIZED (SELECT key FROM ledger_queue WHERE queue IN"
            f" ({', '.join(['%s'] * queues)})) SELECT {codec.T_COLUMNS}, d.due FROM q"
            " JOIN ledger_due d ON d.key = q.key JOIN ledger_tasks t ON t.key = d.key"
            f" WHERE {due.level_sql('%s', self.LEASE, limit=limit)}"
        )
        return sql + " FOR UPDATE OF t SKIP LOCKED" if lock else sql

    def ready_at_clock(
        self, queues_at: Callable[[Instant], QueueFilter | None] | None = None
    ) -> tuple[Instant, Iterator[TaskState]] | None:
        """`(now, ready_candidates(now))` with `now` the server's clock: inside
        a `--next` claim's batch the clock read with its pause check
        (`read_pause(for_claim=True)`, with the first priority level), which
        costs no round trip of its own; else `now()`. Inside a batch, None when
        there is no candidate (nothing to judge). `queues_at(now)`: the queue
        filter for that clock (the queues at their limit depend on it), or
        None for every queue."""
        with self._lock:
            self._check_open()
            start, self._claim_start = self._claim_start, None
            if start is not None and self._depth:  # read with the pause check
                now = start[0]
                filt = None if queues_at is None else queues_at(now)
                cands = self.ready_candidates(now, (start[1],), filt)
            else:
                now = self.now()
                filt = None if queues_at is None else queues_at(now)
                cands = self.ready_candidates(now, None, filt)
            if not self._depth:
                return now, cands
            head = next(cands, None)
            if head is None:
                return None  # no candidate: nothing to judge
            return now, itertools.chain((head,), cands)

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        """The pause (docs/design.md §8.3; stores/sql/pause.py). A `--next` claim reads the
        row FOR SHARE in its transaction, so `pause`'s UPDATE waits for it. Any
        other read inside a batch (`pause`, `resume`: read, then write) locks
        the row FOR UPDATE, so of two at once the second reads what the first
        wrote and says "already" instead of both changing it."""
        with self._lock:
            self._check_open()
            if not (for_claim and self._depth):
                # in a snapshot (read only) or outside a batch: a plain read
                locks = self._depth and not self._snapshot
                query = pause.READ_FOR_WRITE_PG if locks else pause.READ
                with self._errors("pause"):
                    row = self._conn.execute(query).fetchone()
                return pause.state_of(row)
            with self._errors("pause"):
                row = self._conn.execute(_CLAIM_START).fetchone()
            if row is None:
                return None
            self._claim_start = (
                Instant.from_datetime(row[4]).utc(),
                None if row[5] is None else int(row[5]),
            )
            got = row[6] if isinstance(row[6], dict) else {}
            self._claim_limits = {str(q): queues.limit_of(str(q), n) for q, n in got.items()}
        return pause.state_of(row[:4])

    # -- queues (docs/design.md §8.7; stores/sql/sidetables.py) ------------------

    def lock_limit(self, queue: str, key: str | None = None) -> int | None:
        """In the open transaction: lock `key`'s row (when given: a claim by
        key), then `queue`'s limit row, until the transaction ends; the limit
        (None: the queue has none now).

        Workers on several hosts claim at once here, each in its own READ
        COMMITTED transaction, so counting the held slots and claiming is made
        one unit by this lock: the task's own row first, the order a `claim
        --next` scan takes them in, so two claimers never wait on each other in
        a circle; the count that follows sees every claim committed before the
        lock was granted.
        """
        with self._lock:
            self._check_open()
            with self._errors("limit"):
                if key is not None and codec.is_utf8(key):
                    self._conn.execute(self._sql(queues.LOCK_TASK), (key,))
                row = self._conn.execute(self._sql(queues.LOCK_LIMIT), (queue,)).fetchone()
        return queues.limit_of(queue, row[0]) if row is not None else None

    # -- Store -------------------------------------------------------------------

    def load(self, key: str) -> TaskState | None:
        if not codec.is_utf8(key):
            return None  # PostgreSQL text holds valid UTF-8 only: no such row exists
        self._check_text(key)
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
        self._check_text(key, **_state_fields(new))
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
                done = rerun(lambda: self._swap(sql, params, op) is not None)
                if done and old is None:
                    self._inserts += 1
                    self.refresh_stats()
                return done
            self._preloaded.pop(key, None)
            row = self._swap(sql, params, op)
            if row is None:
                self._held.pop(key, None)
            else:
                self._held[key] = codec.row_to_state(row)
                self._inserts += old is None
            return row is not None

    def _swap(self, sql: str, params: Sequence[object], op: str) -> Any:
        with self._errors(op):
            return self._conn.execute(sql, params).fetchone()

    # -- History -----------------------------------------------------------------

    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        if not entries:
            return
        params = []
        for e in entries:
            self._check_text(e.key, actor=e.actor, event=e.event, data=e.data, time=e.time)
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
