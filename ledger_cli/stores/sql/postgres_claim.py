"""The PostgreSQL store's claim path: the Ready candidates and the pause.

`PostgresClaims` reads the Ready order (docs/design.md §8.2) through `ledger_due`
(postgres_due.py) and the plain candidate order through `ledger_ready`
(readyindex.py), each row FOR UPDATE SKIP LOCKED inside a batch and kept as
held; the pause (docs/design.md §8.3), read FOR SHARE by a `--next` claim together with
the server's clock and the first priority level; and the hooks that read the
clock without a round trip of its own (`now_with`, `ready_at_clock`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, due, pause, postgres_due, postgres_readyindex, readyindex
from ledger_cli.stores.sql import queues as sql_queues
from ledger_cli.stores.sql.postgres_conn import PostgresConnection

if TYPE_CHECKING:
    from ledger_cli.engine.queuefilter import Filter as QueueFilter

# The server's clock and a key's row in one statement (a row even for a key
# with no record): statement_timestamp() is read as the statement starts, so
# before the row's snapshot is taken, as reading the clock and then the record.
_CLOCKED_LOAD = (
    "SELECT statement_timestamp(), "
    + ", ".join(f"t.{c.strip()}" for c in codec.SELECT_COLUMNS.split(","))
    + " FROM (SELECT 1) c LEFT JOIN ledger_tasks t ON t.key = %s"
)
_CLOCKED_PAGE = postgres_readyindex.clocked_page_sql(
    codec.SELECT_COLUMNS, postgres_readyindex.PG_LEASE
)
_CLAIM_START = (
    "SELECT paused, since, actor, reason, clock_timestamp(),"
    " (SELECT min(rank) FROM ledger_due WHERE rank > -1000001),"
    " (SELECT coalesce(json_object_agg(queue, n), '{}') FROM ledger_limit)"
    " FROM ledger_pause WHERE id = 1 FOR SHARE"
)
"""A `--next` claim's first statement: the pause (read FOR SHARE, docs/design.md §8.3), the
server's clock, the first priority level of the due index (docs/design.md §8.2) and the
queues' limits (issue 32), in one round trip."""


class PostgresClaims(PostgresConnection):
    """The claim path of a `PostgresStore`: candidates, the clock hooks, the pause."""

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

    orders_schedules = True
    """`ready_candidates` yields the Ready order of docs/design.md §8.2 and leaves out tasks
    not yet due (stores/sql/postgres_due.py): engine/ready.py needs no scan."""

    filters_queues = True
    """`ready_candidates` takes a queue filter, applied in the index scan (so
    FOR UPDATE SKIP LOCKED locks no row of another queue)."""

    def ready_candidates(
        self,
        now: Instant | None = None,
        first_rank: tuple[int | None] | None = None,
        queues: QueueFilter | None = None,
    ) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed and
        that are due, in the Ready order (priority, due, key), through the
        trigger-kept `ledger_due` table (stores/sql/postgres_due.py). Inside a batch each
        is read with FOR UPDATE SKIP LOCKED, one row at a time, as below.
        `queues`: those of the queues it admits only (queues.condition)."""
        cond: tuple[str, tuple[str, ...]] | None = ("", ())
        if queues is not None:
            cond = sql_queues.condition(queues.wanted, queues.skip, "%s")
        if cond is None:
            return
        locking = self._locking_reads()
        page = 1 if locking else 16
        lease = postgres_readyindex.PG_LEASE
        sql = due.page_sql(
            codec.SELECT_COLUMNS, lease, "%s", lock=locking, limit=page, extra=cond[0]
        )
        first: tuple[str, ...] = ()
        if queues is not None and queues.wanted is not None and "default" not in cond[1]:
            # named queues only: read through ledger_queue's (queue, key) index
            sql = postgres_due.queue_page_sql(
                codec.SELECT_COLUMNS, lease, lock=locking, limit=page, queues=len(cond[1])
            )
            first, cond = cond[1], ("", ())
        at = readyindex.sortable(now)
        rank = due.FIRST_RANK
        found: Any
        while True:
            if first_rank is not None:  # read already (`_claim_start`)
                found, first_rank = first_rank, None
            else:
                with self._lock:
                    self._check_open()
                    with self._errors("ready scan"):
                        found = self._conn.execute(due.next_rank("%s"), (rank,)).fetchone()
            if found is None or found[0] is None:
                return
            rank = int(found[0])
            after = ("", "")
            while True:
                with self._lock:
                    self._check_open()
                    with self._errors("ready scan"):
                        args = (*first, rank, at, after[0], after[1], at, *cond[1])
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
        return self._ready_pages(now, after, self._locking_reads(), None)

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
            codec.SELECT_COLUMNS,
            "%s",
            postgres_readyindex.PG_LEASE,
            lock=locking,
            limit=page,
            only=only,
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

    def ready_at_clock(
        self, queues_at: Callable[[Instant], QueueFilter | None] | None = None
    ) -> tuple[Instant, Iterator[TaskState]] | None:
        """`(now, ready_candidates(now))` with `now` the server's clock, read
        inside the batch by the first page query itself (`clock_timestamp()`
        as its lease cut-off, returned with the row): the clock costs no round
        trip of its own. None when that page is empty (the clock was not
        read: no candidate, nothing to judge). Outside a batch: `now()`, then
        the candidates. `queues_at(now)`: the queue filter for that clock (the
        queues at their limit depend on it), or None for every queue."""
        with self._lock:
            self._check_open()
            start, self._claim_start = self._claim_start, None
            if self.orders_schedules or not self._depth:  # the clock, then the due index
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

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        """The pause (docs/design.md §8.3; stores/sql/pause.py). A `--next` claim reads the
        row FOR SHARE in its transaction, so `pause`'s UPDATE waits for it. Any
        other read inside a batch (`pause`, `resume`: read, then write) locks
        the row FOR UPDATE, so of two at once the second reads what the first
        wrote and says "already" instead of both changing it."""
        with self._lock:
            self._check_open()
            if not (for_claim and self._depth):
                query = pause.READ_FOR_WRITE_PG if self._depth else pause.READ
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
            self._claim_limits = {str(q): int(n) for q, n in got.items()}
        return pause.state_of(row[:4])

    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        with self.batch(), self._lock, self._errors("pause"):
            self._conn.execute(pause.WRITE_PG, pause.params(state))
