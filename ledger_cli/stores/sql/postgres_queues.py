"""The PostgreSQL store's queues and limits (issue 32; stores/sql/queues.py,
engine/queues.py).

Workers on several hosts claim at once here, each in its own READ COMMITTED
transaction, so counting the held slots and claiming is made one unit by a
lock: `lock_limit` takes the queue's `ledger_limit` row FOR UPDATE (after the
task's own row, the order a `claim --next` scan takes them in, so two claimers
never wait on each other in a circle), and the count that follows sees every
claim committed before the lock was granted.
"""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import codec, queues
from ledger_cli.stores.sql.postgres_conn import PostgresConnection, no_nul


class PostgresQueues(PostgresConnection):
    """`queue_of`, `set_queue`, `queues`, `limits`, `set_limit`, `lock_limit`
    and `claimed_leases` of a `PostgresStore`."""

    def queue_of(self, key: str) -> str | None:
        if not codec.is_utf8(key):
            return None
        with self._lock:
            self._check_open()
            with self._errors("queue"):
                row = self._conn.execute(queues.sql(queues.SELECT_ONE, "%s"), (key,)).fetchone()
        return str(row[0]) if row is not None else None

    def set_queue(self, key: str, queue: str | None) -> None:
        no_nul(key)
        with self.batch(), self._lock, self._errors("queue"):
            if queue is None:
                self._conn.execute(queues.sql(queues.DELETE, "%s"), (key,))
            else:
                no_nul(queue)
                self._conn.execute(queues.sql(queues.UPSERT, "%s"), (key, queue))

    def queues(self) -> dict[str, str]:
        with self._lock:
            self._check_open()
            with self._errors("queue"):
                rows = self._conn.execute(queues.SELECT_ALL).fetchall()
        return {str(k): str(q) for k, q in rows}

    def limits(self) -> dict[str, int]:
        with self._lock:
            self._check_open()
            if self._claim_limits is not None and self._depth:
                # read with this batch's claim start (`read_pause(for_claim=True)`)
                return dict(self._claim_limits)
            with self._errors("limit"):
                rows = self._conn.execute(queues.LIMITS).fetchall()
        return {str(q): int(n) for q, n in rows}

    def set_limit(self, queue: str, n: int | None) -> None:
        no_nul(queue)
        with self.batch(), self._lock, self._errors("limit"):
            if n is None:
                self._conn.execute(queues.sql(queues.DELETE_LIMIT, "%s"), (queue,))
            else:
                self._conn.execute(queues.sql(queues.UPSERT_LIMIT, "%s"), (queue, n))

    def lock_limit(self, queue: str, key: str | None = None) -> int | None:
        """In the open transaction: lock `key`'s row (when given: a claim by
        key), then `queue`'s limit row, until the transaction ends; the limit
        (None: the queue has none now)."""
        with self._lock:
            self._check_open()
            with self._errors("limit"):
                if key is not None and codec.is_utf8(key):
                    self._conn.execute(queues.sql(queues.LOCK_TASK, "%s"), (key,))
                row = self._conn.execute(queues.sql(queues.LOCK_LIMIT, "%s"), (queue,)).fetchone()
        return int(row[0]) if row is not None else None

    def claimed_leases(self) -> list[tuple[str, str, Instant]]:
        """Every claimed task's key, queue and LeaseUntil, in one query."""
        with self._lock:
            self._check_open()
            with self._errors("queue"):
                rows = self._conn.execute(queues.CLAIMED).fetchall()
        return [
            (str(k), str(q), codec.decode_time(lease, str(k), "lease_until"))
            for k, q, lease in rows
        ]
