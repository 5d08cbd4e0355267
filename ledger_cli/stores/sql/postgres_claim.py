"""The PostgreSQL store's own part of the claim path (the rest: claims.py).

`PostgresClaims` adds to the shared `SqlClaims` what only PostgreSQL does:
the hooks that read the server's clock without a round trip of its own
(`now_with`, `ready_at_clock`), the pause (docs/design.md §8.3) read FOR SHARE by a
`--next` claim together with the clock, the first priority level and the
queues' limits, and the named queues' candidates read through a
MATERIALIZED CTE.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, ddl, due, pause
from ledger_cli.stores.sql.claims import SqlClaims
from ledger_cli.stores.sql.postgres_conn import PostgresConnection
from ledger_cli.stores.sql.queues import limit_of

if TYPE_CHECKING:
    from ledger_cli.engine.queuefilter import Filter as QueueFilter

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


class PostgresClaims(PostgresConnection, SqlClaims):
    """The claim path of a `PostgresStore`: the clock hooks, the pause."""

    LEASE = ddl.PG.sortkey("t.lease_until")

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
            self._claim_limits = {str(q): limit_of(str(q), n) for q, n in got.items()}
        return pause.state_of(row[:4])
