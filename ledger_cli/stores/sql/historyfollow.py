"""Following `ledger_history` (`ledger log --follow`): each poll reads only
the rows whose id is past the last one returned (the primary key's index), a
page at a time, never the whole table.

SQLite has one writer at a time, and an id is given inside the writer's
transaction: ids become visible in order, so `id > last` misses nothing.
PostgreSQL gives ids from a sequence as rows are inserted, and transactions
commit in any order: a row with a lower id can become visible after a higher
one was read. So on PostgreSQL (`gap_wait` > 0) the ids skipped over are
asked for again by each poll (`id = ANY(gaps)`), until they turn up or
`gap_wait` seconds pass (an id of a rolled-back transaction never does); a
row that commits later than that after a higher one is not printed. A jump
of more than MAX_GAPS ids (a sequence moved on by other means) is not
tracked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.stores.sql.codec import HISTORY_COLUMNS
from ledger_cli.stores.sql.paging import HISTORY_PAGE, history_entry

MAX_GAPS = 1000
PG_GAP_WAIT = 60.0
"""Seconds a skipped id is waited for on PostgreSQL (longer than a unit of
work takes from its history insert to its commit)."""

Fetch = Callable[[str, tuple[Any, ...]], Sequence[Sequence[Any]]]


class SqlHistoryFollower:
    """`poll()`: the history rows committed since the last poll (the first
    poll: since the follower was made)."""

    def __init__(self, fetch: Fetch, mark: str, gap_wait: float = 0.0) -> None:
        self._fetch = fetch
        self._mark = mark
        self._gap_wait = gap_wait
        rows = fetch("SELECT COALESCE(MAX(id), 0) FROM ledger_history", ())
        self._last = int(rows[0][0]) if rows else 0
        self._gaps: dict[int, float] = {}
        """Ids skipped over, and when: asked for again until `gap_wait` passes."""

    def poll(self) -> list[HistoryEntry]:
        m = self._mark
        out: list[HistoryEntry] = []
        now = time.monotonic()
        gaps = sorted(self._gaps)
        while True:
            where = f"id > {m} OR id = ANY({m})" if gaps else f"id > {m}"
            sql = f"SELECT id, {HISTORY_COLUMNS} FROM ledger_history WHERE {where}"
            args = (self._last, gaps) if gaps else (self._last,)
            rows = self._fetch(f"{sql} ORDER BY id LIMIT {m}", (*args, HISTORY_PAGE + len(gaps)))
            fresh = 0
            for row in rows:
                id_ = int(row[0])
                if id_ <= self._last:
                    if self._gaps.pop(id_, None) is not None:
                        out.append(history_entry(row))  # committed late: printed now
                    continue
                fresh += 1
                skipped = id_ - self._last - 1
                if self._gap_wait > 0 and 0 < skipped <= MAX_GAPS:
                    for missing in range(self._last + 1, id_):
                        self._gaps[missing] = now
                self._last = id_
                out.append(history_entry(row))
            gaps = []
            if fresh < HISTORY_PAGE:
                break
        for id_, since in list(self._gaps.items()):
            if now - since > self._gap_wait:
                del self._gaps[id_]
        return out

    def close(self) -> None:
        pass
