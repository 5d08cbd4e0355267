"""The SQLite store's queues and limits (issue 32; stores/sql/queues.py)."""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import codec, queues
from ledger_cli.stores.sql.sqlite_conn import SQLiteConnection


class SQLiteQueues(SQLiteConnection):
    """`queue_of`, `set_queue`, `queues`, `limits`, `set_limit` of an `SQLiteStore`."""

    def _queue_tables(self) -> bool:
        rows = self._fetchall("queue", queues.EXISTS, (queues.QUEUE_TABLE, queues.LIMIT_TABLE))
        return bool(rows and rows[0][0] == 2)

    def _make_queue_tables(self) -> None:
        for ddl in queues.SQLITE_DDL:
            self._conn.execute(ddl)

    def queue_of(self, key: str) -> str | None:
        with self._lock:
            self._check_open()
            if not self._queue_tables():
                return None
            rows = self._fetchall("queue", queues.sql(queues.SELECT_ONE, "?"), (key,))
        return str(rows[0][0]) if rows else None

    def set_queue(self, key: str, queue: str | None) -> None:
        with self.batch(), self._lock, self._errors("queue"):
            if queue is None:
                if self._queue_tables():
                    self._conn.execute(queues.sql(queues.DELETE, "?"), (key,))
                return
            self._make_queue_tables()
            self._conn.execute(queues.sql(queues.UPSERT, "?"), (key, queue))

    def queues(self) -> dict[str, str]:
        with self._lock:
            self._check_open()
            if not self._queue_tables():
                return {}
            rows = self._fetchall("queue", queues.SELECT_ALL, ())
        return {str(k): str(q) for k, q in rows}

    def limits(self) -> dict[str, int]:
        with self._lock:
            self._check_open()
            if not self._queue_tables():
                return {}
            rows = self._fetchall("limit", queues.LIMITS, ())
        return {str(q): int(n) for q, n in rows}

    def set_limit(self, queue: str, n: int | None) -> None:
        with self.batch(), self._lock, self._errors("limit"):
            if n is None:
                if self._queue_tables():
                    self._conn.execute(queues.sql(queues.DELETE_LIMIT, "?"), (queue,))
                return
            self._make_queue_tables()
            self._conn.execute(queues.sql(queues.UPSERT_LIMIT, "?"), (queue, n))

    def claimed_leases(self) -> list[tuple[str, str, Instant]]:
        """Every claimed task's key, queue and LeaseUntil, in one query."""
        with self._lock:
            self._check_open()
            sql = queues.CLAIMED if self._queue_tables() else queues.CLAIMED_DEFAULT
            rows = self._fetchall("queue", sql, ())
        out: list[tuple[str, str, Instant]] = []
        for k, q, lease in rows:
            key = codec.read_text(k, "(claimed)", "key")
            out.append((key, str(q), codec.decode_time(lease, key, "lease_until")))
        return out
