"""What the web view reads from the store, in the shapes of the CLI's `--json`.

`Reader` lets one request at a time read (a lock), through a store opened as
a fresh read command would open it (`cli/freshreads.py`): a JSON directory or
SQLite file afresh for each request, so a store deleted, replaced or damaged
while served is answered as `ledger stats` would answer, never from the old
file; one connection kept on PostgreSQL. Listings are paged by key (`after`), so a page of the task
table reads at most `limit + 1` records past its cursor on the SQL stores.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import threading
from typing import TYPE_CHECKING, Any

from ledger_cli.cli import output

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from ledger_cli.cli.context import Session
    from ledger_cli.engine.attempts import Attempt
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.record import TaskState

STATUSES = ("pending", "claimed", "completed", "failed", "blocked")
PAGE = 100
"""Rows of a task-table page unless `limit` says otherwise."""
MAX_PAGE = 1000
"""The most rows one page may ask for."""
OUTPUT_MAX = 1 << 20
"""The most bytes of output one response carries (the last ones)."""


class Page:
    """One page of the task table: its records and the cursor of the next page."""

    def __init__(self, records: list[TaskState], next_after: str | None) -> None:
        self.records = records
        self.next_after = next_after


class Reader:
    """The served store, read by one request at a time."""

    def __init__(self, session: Session) -> None:
        """`session`: the store `serve` opened (and checked) at its start."""
        from ledger_cli.cli.freshreads import FreshReads

        self.reads = FreshReads(session.settings, session)
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Session]:
        """The store for one request: a JSON or SQLite store opened for it (a
        NoStoreError when the path served is gone: never an empty ledger)."""
        with self.lock:
            session = self.reads.open()
            ok = False
            try:
                yield session
                ok = True
            finally:
                self.reads.done(ok)

    def page(
        self, statuses: frozenset[str], prefix: str, after: str, limit: int, queue: str = ""
    ) -> Page:
        """Up to `limit` visible records with a key after `after` (byte order)
        that start with `prefix` and have one of `statuses` (all when empty).
        `queue` is the hook for queues: no store keeps one yet, so a queue
        other than "" matches nothing."""
        from ledger_cli.engine import prune
        from ledger_cli.engine.record import byte_order

        if queue:
            return Page([], None)
        prefix_b = byte_order(prefix)
        after_b = byte_order(after)

        def wanted(rec: TaskState, kb: bytes) -> bool:
            return (
                kb.startswith(prefix_b)
                and (not after or kb > after_b)
                and (not statuses or rec.status in statuses)
            )

        with self._reading() as s:
            view = getattr(s.store, "visible_after", None)
            scan = getattr(s.store, "scan_visible", None)
            if view is None and scan is not None:
                # The JSON store keeps no key order: stream every record without
                # the store's lock (writers go on) and keep the smallest keys.
                best = heapq.nsmallest(
                    limit + 1,
                    (r for r in scan() if wanted(r, byte_order(r.key))),
                    key=lambda r: byte_order(r.key),
                )
                more = len(best) > limit
                return Page(best[:limit], best[limit - 1].key if more else None)
            if view is None:
                records = prune.visible(s.store)
            else:  # keyset pages from the cursor (or the prefix) on
                start = after if after_b >= prefix_b else prefix
                records = iter(view(start, sorted(statuses)))
                first = _load(s, prefix) if prefix and start == prefix else None
                if first is not None and not prune.is_pruned(s.store, prefix):
                    records = itertools.chain((first,), records)  # `view` starts after it
            found: list[TaskState] = []
            for rec in records:
                kb = byte_order(rec.key)
                if kb > prefix_b and not kb.startswith(prefix_b):
                    break  # key order: nothing further starts with the prefix
                if not wanted(rec, kb):
                    continue
                if len(found) == limit:
                    return Page(found, found[-1].key)
                found.append(rec)
        return Page(found, None)

    def load(self, key: str) -> TaskState | None:
        with self._reading() as s:
            return _load(s, key)

    def task(self, key: str) -> tuple[TaskState, list[Attempt], list[HistoryEntry]] | None:
        """A record, its kept attempts (the abandoned ones judged so) and its
        history lines, or None."""
        from ledger_cli.cli.outcome import judged_attempts

        with self._reading() as s:
            rec = _load(s, key)
            if rec is None:
                return None
            atts = judged_attempts(s.store, rec, s.now())
            read = getattr(s.store, "read_history", None)
            history: list[HistoryEntry] = list(read(key)) if read is not None else []
        return rec, atts, history

    def task_json(self, key: str) -> str | None:
        """`ledger --json state KEY`: the wire record with `"attempts"`."""
        from ledger_cli.cli.outcome import with_attempts
        from ledger_cli.engine import schedule

        with self._reading() as s:
            rec = _load(s, key)
            if rec is None:
                return None
            kept = schedule.of(s.store, key)
            if kept is None:
                doc = str(output.record(rec))
            else:
                from ledger_cli.engine.wireext import record_json

                doc = record_json(rec, kept)
            return with_attempts(doc, s.store, rec, s.now())

    def output(self, key: str, n: int | None, since: int) -> dict[str, Any] | None:
        """`ledger --json output KEY`: the attempt (judged) and its kept output from byte
        `since` on (the last OUTPUT_MAX bytes at most); None without a record
        or an attempt. `"seen"` is the byte count to ask from next."""
        from ledger_cli.engine.attempts import judge, taken_lease
        from ledger_cli.stores.attemptlog import attempt_log

        with self._reading() as s:
            rec = _load(s, key)
            if rec is None:
                return None
            log = attempt_log(s.store)
            atts = log.list_attempts(key)
            if not atts:
                return None
            n = atts[-1].n if n is None else n
            att, data = log.read_new(key, n, since)
            if att is None:
                return None
            judge((att,), rec, s.now(), taken_lease(s.store, key))
        # A character the command is still writing waits for the next poll,
        # rather than come out as two replacement characters.
        cut = unfinished_char(data) if att.ended is None and not att.abandoned else 0
        whole = data[: len(data) - cut]
        return {
            "key": key,
            "attempt": att.shown_obj(),
            "output": whole[-OUTPUT_MAX:].decode("utf-8", "replace"),
            "seen": att.output_bytes - cut,
        }

    def stats(self) -> dict[str, Any]:
        """`ledger --json stats`."""
        from ledger_cli.cli.commands.stats import collect

        with self._reading() as s:
            return collect(s.store, s.now()).to_obj()

    def graph(self, draw: bool = True) -> tuple[Any, str | None]:
        """The graph of needs as `ledger --json graph` shows it and, with
        `draw`, as an SVG picture (None when the graph is too large to draw:
        `ledger graph --format dot` still draws it). Imported here, so the
        server's start-up does not pay for it."""
        from ledger_cli.cli.graph import model, svg

        with self._reading() as s:
            graph = model.collect(s.store)
        if not draw:
            return graph.to_obj(), None
        try:
            return graph.to_obj(), svg.to_svg(graph)
        except svg.TooLargeError:
            return graph.to_obj(), None


def _load(s: Session, key: str) -> TaskState | None:
    """`s.load(key)`; None for a key the store cannot hold (PostgreSQL: a NUL),
    which no record has: a read of it is no such key on every store, as
    `list` finds none (docs/design.md §3.4), never a store error."""
    holds: Callable[[str], bool] | None = getattr(s.store, "holds", None)
    if holds is not None and not holds(key):
        return None
    return s.load(key)


def unfinished_char(data: bytes) -> int:
    """How many bytes at the end of `data` begin a UTF-8 character that it
    does not finish (0 to 3)."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return 0
        if byte >= 0xC0:  # the lead byte: its character's length
            size = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return back if back < size else 0
    return 0
