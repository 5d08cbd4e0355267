"""The SQL store's listing reads: scans, pages and counts, for both dialects.

`SqlReads` holds the reads that list or count records and history rather
than load one key: the whole range, the by-status scans `watch` and
`by_status` use, the dependents walk through `ledger_needs` (`IN_MAX` keys a
statement), the prune-aware listings (paged by key: paging.py), the pruned
marks, the status counts of `ledger stats`, the history read in pages by
id and its highest fence a key (`ledger restore`). What differs by database
comes from the dialect (dialect.py): on an SQLite database whose encoding is
not UTF-8 key order is not byte order, so those reads sort in Python; a
status or key PostgreSQL cannot hold (a NUL, bytes that are not UTF-8)
matches no row there, so it is not sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.record import TaskState, byte_order, go_quote, is_known
from ledger_cli.errors import StoreError
from ledger_cli.stores.sql import codec, paging, readyindex
from ledger_cli.stores.sql.dialect import SqlDialect

if TYPE_CHECKING:
    from ledger_cli.engine.badrows import BadRows
    from ledger_cli.stores.sql.historyfollow import SqlHistoryFollower

_SELECT = f"SELECT {codec.SELECT_COLUMNS} FROM ledger_tasks"
_LOST_ROWS = (
    "SELECT key FROM ledger_history WHERE key <> ''"
    " EXCEPT SELECT key FROM ledger_tasks EXCEPT SELECT key FROM ledger_pruned"
)
"""The keys of a lost row: history keys, but for those in the table or pruned."""


class SqlReads(SqlDialect):
    """The listing reads of an SQL store."""

    bad_rows: BadRows | None = None
    """Set by engine/badrows.around: the listings note a row that does not
    decode there and go on (docs/design.md §5.5)."""

    def range(self) -> Iterator[TaskState]:
        """Every record sorted by key (UTF-8 bytes), read in one statement (one snapshot)."""
        return iter(self._records(f"{_SELECT} {self.KEY_ORDER}", (), "range"))

    def by_status(self, statuses: Iterable[str]) -> list[TaskState]:
        """Records whose status is one of `statuses`, oldest CreatedAt first, then key.

        Served by the (status, created_at, key) index, so the claimable-work scan
        (`by_status(("pending", "claimed"))`) reads live records only.
        """
        wanted = self._holdable(statuses)
        if not wanted:
            return []
        cond, args = self._in("status", wanted)
        rows = self._rows("scan", f"{_SELECT} WHERE {cond}", args)
        return codec.claimable_order(self._decoded(rows))

    def by_status_head(self, statuses: Iterable[str], limit: int) -> list[TaskState]:
        """The first `limit` records whose status is one of `statuses`, in key
        order (UTF-8 bytes), sorted in the database (`watch` draws no more)."""
        wanted = self._holdable(statuses)
        if not wanted or limit <= 0:
            return []
        if not self._utf8:  # key order is not byte order here
            return sorted(self.by_status(wanted), key=lambda r: byte_order(r.key))[:limit]
        cond, args = self._in("status", wanted)
        sql = f"{_SELECT} WHERE {cond} {self.KEY_ORDER} LIMIT {self.MARK}"
        return self._records(sql, (*args, limit))

    def blocked_by_keys(self) -> list[str]:
        """The keys blocked records are blocked by, each once (`watch`'s failed roots),
        read as the records' `blocked_by` reads (lossless text, NULL as "")."""
        sql = "SELECT DISTINCT blocked_by FROM ledger_tasks WHERE status = 'blocked'"
        rows = self._rows("scan", sql)
        keys = (codec.read_text(row[0], "(blocked by)", "blocked_by") for row in rows)
        return list(dict.fromkeys(keys))

    def _records(self, sql: str, args: tuple[Any, ...] = (), op: str = "scan") -> list[TaskState]:
        rows = self._rows(op, sql, args)  # lossless text on a bad value
        return self._in_key_order(self._decoded(rows))

    def _decoded(self, rows: list[Any]) -> list[TaskState]:
        """Each row's record; a row that does not decode raises, or in a
        listing that goes around bad rows (`bad_rows`) is noted and left out."""
        bad = self.bad_rows
        if bad is None:
            return [codec.row_to_state(row) for row in rows]
        found: list[TaskState] = []
        for row in rows:
            try:
                found.append(codec.row_to_state(row))
            except StoreError as exc:
                bad.note(codec.shown(codec.read_text(row[0], "?", "key")), exc)
        return found

    def dependents(self, keys: Iterable[str]) -> list[TaskState]:
        """The records naming any of `keys` in their needs (engine
        `dependents_walk`), through the trigger-kept `ledger_needs` table
        (every record's needs, indexed by need), `IN_MAX` keys a statement."""
        wanted = self._holdable(keys)
        found: list[TaskState] = []
        for at in range(0, len(wanted), self.IN_MAX):
            cond, args = self._in("need", wanted[at : at + self.IN_MAX])
            sql = f"{_SELECT} WHERE key IN (SELECT key FROM ledger_needs WHERE {cond})"
            found += self._records(sql, args)
        return found

    def _record_page(self, sql: str, args: tuple[Any, ...]) -> tuple[list[TaskState], int, str]:
        """A page of a keyset read: its records, how many rows it held (a row
        gone around still counts) and the last row's key."""
        rows = self._rows("scan", sql, args)
        last = codec.read_text(rows[-1][0], "?", "key") if rows else ""
        return self._in_key_order(self._decoded(rows)), len(rows), last

    def visible_range(self) -> Iterator[TaskState]:
        """Every record but the pruned ones, sorted by key, read in pages of 1000
        (keyset): `list` prints its first rows at once, in constant memory."""
        if not self._utf8:  # key order is not byte order: one sorted read
            yield from self._records(readyindex.visible_sql(codec.SELECT_COLUMNS))
            return
        sql = readyindex.visible_page_sql(codec.SELECT_COLUMNS, self.MARK)
        yield from paging.read_record_pages(self._record_page, sql)

    def visible_after(self, after: str, statuses: Iterable[str] = ()) -> Iterator[TaskState]:
        """The unpruned records with a key after `after` (byte order), in key
        order and in pages, only those with one of `statuses` when given (the
        database filters): a page of `ledger serve`'s task table reads from its
        cursor on, not from the first key."""
        given = tuple(statuses)
        among = self._holdable(given)
        if given and not among:  # no row holds any of them
            return
        if not self._utf8 or not self._holds(after):  # filter the sorted read
            start = byte_order(after)
            yield from (
                r
                for r in self.visible_range()
                if byte_order(r.key) > start and (not among or r.status in among)
            )
            return
        sql = readyindex.visible_page_sql(codec.SELECT_COLUMNS, self.MARK, len(among))
        yield from paging.read_record_pages(self._record_page, sql, after, among)

    def pruned_range(self) -> Iterator[TaskState]:
        """The pruned records, sorted by key."""
        return iter(self._records(readyindex.pruned_sql(codec.T_COLUMNS)))

    def is_pruned(self, key: str) -> bool:
        sql = f"SELECT 1 FROM ledger_pruned WHERE key = {self.MARK}"
        return bool(self._rows("load", sql, (key,)))

    def count_pruned(self) -> int:
        rows = self._rows("count", "SELECT count(*) FROM ledger_pruned")
        return int(rows[0][0]) if rows else 0

    def status_counts(self) -> dict[str, int]:
        """Unpruned records by status, counted in SQL (`ledger stats`)."""
        rows = self._rows("count", readyindex.STATUS_COUNTS_SQL)
        counts = {str(status): int(n) for status, n in rows}
        unknown = sorted(status for status in counts if not is_known(status))
        if unknown:  # left out, the figures would look whole and be wrong
            raise StoreError(
                f"ledger: {sum(counts[s] for s in unknown)} stored records have a status "
                f"this ledger does not know, such as {go_quote(unknown[0])}; "
                "ledger doctor names them"
            )
        return counts

    def _history_rows(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        return self._rows("history read", sql, args)

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        """Oldest first; read in pages by id, so a long log is never held whole."""
        if key is not None and not self._holds(key):
            return
        yield from paging.read_history_pages(self._history_rows, self.MARK, key)

    def history_fences(self, keys: Iterable[str]) -> dict[str, int]:
        """The highest fence each of `keys` has in `ledger_history` (a key with
        no row left out), `IN_MAX` keys a statement through the index by key:
        `ledger restore` starts each record above it (docs/design.md §2.9)."""
        wanted = self._holdable(keys)
        found: dict[str, int] = {}
        for at in range(0, len(wanted), self.IN_MAX):
            cond, args = self._in("key", wanted[at : at + self.IN_MAX])
            sql = f"SELECT key, MAX(fence) FROM ledger_history WHERE {cond} GROUP BY key"
            for key, fence in self._history_rows(sql, args):
                found[codec.read_text(key, "?", "key")] = int(fence)
        return found

    def lost_rows(self) -> list[str]:
        """The keys `ledger_history` has writes for that are neither in
        `ledger_tasks` nor pruned: rows deleted by hand (no command deletes
        one), in key order, in one query (`ledger doctor`, docs/design.md §3.3)."""
        rows = self._history_rows(_LOST_ROWS, ())
        return sorted((codec.read_text(k, "?", "key") for (k,) in rows), key=byte_order)

    def history_follower(self) -> SqlHistoryFollower:
        """`ledger log --follow`: reads the rows past the last one seen (historyfollow.py)."""
        from ledger_cli.stores.sql import historyfollow

        return historyfollow.SqlHistoryFollower(self._history_rows, self.MARK, self.GAP_WAIT)
