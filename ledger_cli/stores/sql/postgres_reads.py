"""The PostgreSQL store's listing reads: scans, pages and counts.

`PostgresReads` holds the reads that list or count records and history rather
than load one key: the whole range, the by-status scans `watch` and
`by_status` use, the dependents walk through `ledger_needs`, the prune-aware
listings (paged by key: paging.py), the pruned marks, the status counts of
`ledger stats`, and the history read in pages by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, paging, readyindex
from ledger_cli.stores.sql.postgres_conn import PostgresConnection

if TYPE_CHECKING:
    from ledger_cli.stores.sql.historyfollow import SqlHistoryFollower

_RANGE = f'SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks ORDER BY key COLLATE "C"'
_DEPENDENTS = (
    f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks"
    " WHERE key IN (SELECT key FROM ledger_needs WHERE need = ANY(%s))"
)
_BY_STATUS = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks WHERE status = ANY(%s)"
_BY_STATUS_HEAD = f'{_BY_STATUS} ORDER BY key COLLATE "C" LIMIT %s'
_BLOCKED_BY = "SELECT DISTINCT blocked_by FROM ledger_tasks WHERE status = 'blocked'"


class PostgresReads(PostgresConnection):
    """The listing reads of a `PostgresStore`."""

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
        yield from paging.read_record_pages(self._records, sql)

    def visible_after(self, after: str, statuses: Iterable[str] = ()) -> Iterator[TaskState]:
        """The unpruned records with a key after `after` (byte order), in key
        order and in pages, only those with one of `statuses` when given (the
        database filters): a page of `ledger serve`'s task table reads from its
        cursor on, not from the first key."""
        among = tuple(dict.fromkeys(statuses))
        sql = readyindex.visible_page_sql(codec.SELECT_COLUMNS, "%s", len(among))
        yield from paging.read_record_pages(self._records, sql, after, among)

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

    def status_counts(self) -> dict[str, int]:
        """Unpruned records by status, counted in SQL (`ledger stats`)."""
        with self._lock:
            self._check_open()
            with self._errors("count"):
                rows = self._conn.execute(readyindex.STATUS_COUNTS_SQL).fetchall()
        return {str(status): int(n) for status, n in rows}

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """Oldest first; read in pages by id, so a long log is never held whole."""
        if key is not None and "\x00" in key:
            return

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                with self._errors("history read"):
                    return list(self._conn.execute(sql, args).fetchall())

        yield from paging.read_history_pages(fetch, "%s", key)

    def history_follower(self) -> SqlHistoryFollower:
        """`ledger log --follow`: reads the rows past the last one seen (historyfollow.py)."""
        from ledger_cli.stores.sql import historyfollow

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                with self._errors("history read"):
                    return list(self._conn.execute(sql, args).fetchall())

        return historyfollow.SqlHistoryFollower(fetch, "%s", historyfollow.PG_GAP_WAIT)
