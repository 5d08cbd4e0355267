"""The SQL store's claim path, for both dialects: the Ready candidates, the
ready figures of `ledger stats` and the pause.

`SqlClaims` reads the Ready order (docs/design.md §8.2) through `ledger_due`
(due.py) and the plain candidate order through `ledger_ready`
(readyindex.py), both kept by each dialect's triggers (*_schema.py), and the
pause (docs/design.md §8.3; pause.py). What differs
comes from the dialect (dialect.py): the sortable lease expression (LEASE),
the query reading a few named queues' candidates first (`_queue_page_sql`),
and whether a scan locks what it reads (`_locking_reads`). PostgreSQL does
inside a batch: each candidate is read FOR UPDATE SKIP LOCKED, one row a
page, and kept as held until the batch ends (postgres_conn.py `_held`), so
concurrent claimers spread over the queue; SQLite's batch is BEGIN
IMMEDIATE, which already keeps every other writer out, so its scans lock
nothing and read a few rows a page (READY_PAGE). PostgreSQL's claim adds the
hooks that read the server's clock without a round trip of its own
(postgres.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, due, pause, readyindex
from ledger_cli.stores.sql import queues as sql_queues
from ledger_cli.stores.sql.dialect import SqlDialect

if TYPE_CHECKING:
    from ledger_cli.engine.queuefilter import Filter as QueueFilter

DEFAULT_QUEUE = "default"


class SqlClaims(SqlDialect):
    """The claim path of an SQL store: candidates, ready figures, the pause."""

    LEASE: ClassVar[str]
    """A candidate's lease_until as the sortable UTC text the index compares."""
    _held: dict[str, TaskState]
    """Rows this transaction holds locked, by key (PostgreSQL: postgres_conn.py)."""

    orders_schedules = True
    """`ready_candidates` yields the Ready order of docs/design.md §8.2 and leaves out tasks
    not yet due (stores/sql/due.py): engine/ready.py needs no scan."""

    filters_queues = True
    """`ready_candidates` takes a queue filter, applied in the index scan (so,
    on PostgreSQL, FOR UPDATE SKIP LOCKED locks no row of another queue)."""

    READY_PAGE: ClassVar[int] = 16
    """Rows a ready scan that locks nothing reads a page (the Ready order's)."""

    def _locking_reads(self) -> bool:
        """Whether the ready scans lock what they read (FOR UPDATE SKIP LOCKED)."""
        return False

    def _queue_page_sql(self, *, lock: bool, limit: int, queues: int) -> str:
        """`due.page_sql` for the tasks of `queues` named queues, none of them
        `default`, driven from `ledger_queue`'s (queue, key) index. Parameters:
        the queue names, then page_sql's."""
        raise NotImplementedError

    def _records_seen(self) -> dict[str, TaskState] | None:
        """Where the records a ready scan decodes are kept for `load` in this
        transaction (SQLite: sqlite_conn.py); None: nowhere."""
        return None

    def _page(
        self, sql: str, args: tuple[Any, ...], locking: bool
    ) -> tuple[Iterable[TaskState], Any]:
        """One page of candidates (each row's sort column last) and its rows;
        with `locking`, inside a batch, the records are kept as held. Else
        each row is decoded as it is reached: a claim takes the first
        candidate of its page, mostly, and leaves the other rows unread."""
        with self._lock:
            rows = self._rows("ready scan", sql, args)
            if not (locking and self._depth):
                return _decoded(rows, self._records_seen()), rows
            recs = [codec.row_to_state(row[:-1]) for row in rows]
            for rec in recs:  # locked until the batch ends
                self._held[rec.key] = rec
        return recs, rows

    def ready_candidates(
        self,
        now: Instant | None = None,
        first_rank: tuple[int | None] | None = None,
        queues: QueueFilter | None = None,
    ) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed and
        that are due, in the Ready order (priority, due, key), through the
        trigger-kept `ledger_due` table (due.py). `queues`: those of the queues
        it admits only (queues.condition). `first_rank`: the first priority
        level, read already (PostgreSQL's `_claim_start`)."""
        cond: tuple[str, tuple[str, ...]] | None = ("", ())
        named = False
        if queues is not None:
            with self._lock:
                self._check_open()
                tables = self._queue_tables()
            if tables:
                cond = sql_queues.condition(queues.wanted, queues.skip, self.MARK)
                named = (
                    cond is not None and queues.wanted is not None and DEFAULT_QUEUE not in cond[1]
                )
            elif not queues.admits(DEFAULT_QUEUE):  # no queue table: every task is in default
                cond = None
        if cond is None:
            return
        locking = self._locking_reads()
        page = 1 if locking else self.READY_PAGE
        sql = due.page_sql(
            codec.T_COLUMNS, self.LEASE, self.MARK, lock=locking, limit=page, extra=cond[0]
        )
        first: tuple[str, ...] = ()
        if named:  # named queues only: read through ledger_queue's (queue, key) index
            sql = self._queue_page_sql(lock=locking, limit=page, queues=len(cond[1]))
            first, cond = cond[1], ("", ())
        yield from due.candidates(
            self._rank_after,
            lambda args: self._page(sql, args, locking),
            readyindex.sortable(now),
            page,
            extra=cond[1],
            first=first,
            first_rank=first_rank,
        )

    def _rank_after(self, rank: int) -> Any:
        rows = self._rows("ready scan", due.next_rank(self.MARK), (rank,))
        return rows[0] if rows else None

    def ready_split(self, now: Instant) -> tuple[int, TaskState | None, Iterator[TaskState]]:
        """`ledger stats`' ready figures with the counting done in SQL: how many
        pending candidates name no needs (each one is ready), the first of them
        in Ready order, and every other candidate (claimed, or naming needs;
        in Ready order) for the caller to judge by the Ready rule. Read without
        row locks, inside a batch or not. A key that is not valid UTF-8 (the
        Go service's bytes, on SQLite) is left out of the count and the first,
        as `claim --next` never hands one out (`ready_apart` counts them)."""
        rows = self._rows("ready count", readyindex.FREE_COUNT)
        free = int(rows[0][0]) if rows else 0
        pages = self._ready_pages(now, readyindex.FREE)
        first = next((r for r in pages if codec.is_utf8(r.key)), None)
        return free - self.ready_apart(), first, self._ready_pages(now, readyindex.NOT_FREE)

    def ready_apart(self) -> int:
        """How many pending candidates naming no needs have a key that is not
        valid UTF-8: none where the database holds valid UTF-8 only."""
        return 0

    def _ready_pages(self, now: Instant | None, only: str) -> Iterator[TaskState]:
        """The candidates through `ledger_ready` in (created, key) order, those
        `only` admits (FREE or NOT_FREE), read without row locks."""
        sql = readyindex.page_sql(codec.T_COLUMNS, self.MARK, self.LEASE, limit=16, only=only)
        at = readyindex.sortable(now)
        # the limit (page) is in the SQL: one generic plan on PostgreSQL
        return readyindex.candidates(
            lambda created, key: self._page(sql, (created, key, at), False), 16
        )

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        """The pause (docs/design.md §8.3; stores/sql/pause.py); on SQLite a `--next`
        claim reads it in its BEGIN IMMEDIATE batch, which `pause` cannot
        interleave with."""
        rows = self._rows("pause", pause.READ)
        return pause.state_of(rows[0] if rows else None)

    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        with self.batch(), self._lock, self._errors("pause"):
            self._conn.execute(self._sql(pause.WRITE), pause.params(state))


def _decoded(rows: list[Any], seen: dict[str, TaskState] | None) -> Iterator[TaskState]:
    """The records of a page's rows (each row's sort column last), decoded as
    they are reached, each kept in `seen` when given."""
    for row in rows:
        rec = codec.row_to_state(row[:-1])
        if seen is not None:
            seen[rec.key] = rec
        yield rec
