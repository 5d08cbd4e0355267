"""The SQLite store's listing reads: scans, pages and counts.

`SQLiteReads` holds the reads that list or count records and history rather
than load one key: the whole range, the by-status scans, the dependents walk
through `ledger_needs` (500 keys a statement), the prune-aware listings
(paged by key: paging.py), the pruned marks, the status counts of `ledger
stats`, and the history read in pages by id. On a database whose encoding is
not UTF-8 key order is not byte order, so those reads sort in Python.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.stores.sql import codec, paging, readyindex
from ledger_cli.stores.sql.sqlite_conn import DRIVER_ERRORS, SQLiteConnection

if TYPE_CHECKING:
    from ledger_cli.stores.sql.historyfollow import SqlHistoryFollower

_RANGE = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks ORDER BY key"


class SQLiteReads(SQLiteConnection):
    """The listing reads of an `SQLiteStore`."""

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
        yield from paging.read_record_pages(self._records, sql)

    def visible_after(self, after: str, statuses: Iterable[str] = ()) -> Iterator[TaskState]:
        """The unpruned records with a key after `after` (byte order), in key
        order and in pages, only those with one of `statuses` when given (the
        database filters): a page of `ledger serve`'s task table reads from its
        cursor on, not from the first key."""
        among = tuple(dict.fromkeys(statuses))
        if not self._utf8:  # key order is not byte order: filter the sorted read
            start = byte_order(after)
            yield from (
                r
                for r in self.visible_range()
                if byte_order(r.key) > start and (not among or r.status in among)
            )
            return
        sql = readyindex.visible_page_sql(codec.SELECT_COLUMNS, "?", len(among))
        yield from paging.read_record_pages(self._records, sql, after, among)

    def pruned_range(self) -> Iterator[TaskState]:
        """The pruned records, sorted by key."""
        return iter(self._records(readyindex.pruned_sql(codec.SELECT_COLUMNS)))

    def is_pruned(self, key: str) -> bool:
        with self._lock:
            self._check_open()
            sql = "SELECT 1 FROM ledger_pruned WHERE key = ?"
            try:
                row = self._cur.execute(sql, (key,)).fetchone()
            except DRIVER_ERRORS as exc:  # a key holding bytes that are not UTF-8
                row = self._retry("load", exc, sql, (key,), one=True)
            return row is not None

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
            rows = self._fetchall("count", readyindex.STATUS_COUNTS_SQL, ())
        return {str(status): int(n) for status, n in rows}

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """Oldest first; read in pages by id, so a long log is never held whole."""

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                return self._fetchall("history read", sql, args)

        yield from paging.read_history_pages(fetch, "?", key)

    def history_follower(self) -> SqlHistoryFollower:
        """`ledger log --follow`: reads the rows past the last one seen (historyfollow.py)."""
        from ledger_cli.stores.sql import historyfollow

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                return self._fetchall("history read", sql, args)

        return historyfollow.SqlHistoryFollower(fetch, "?", 0.0)
