"""The SQLite store's claim path: the Ready candidates and the pause.

`SQLiteClaims` reads the Ready order (docs/design.md §8.2) through `ledger_due`
(sqlite_due.py) and the plain candidate order through `ledger_ready`
(readyindex.py, sqlite_readyindex.py), the ready figures of `ledger stats`
(keys that are not valid UTF-8 counted apart, as `claim --next` never hands
one out), and the pause (docs/design.md §8.3), which a `--next` claim reads inside its
BEGIN IMMEDIATE batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, due, pause, readyindex, sqlite_due, sqlite_readyindex
from ledger_cli.stores.sql import queues as sql_queues
from ledger_cli.stores.sql.sqlite_conn import SQLiteConnection

if TYPE_CHECKING:
    from ledger_cli.engine.queuefilter import Filter as QueueFilter

DEFAULT_QUEUE = "default"

_READY_ODD_KEYS = (
    "SELECT t.key FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
    f" WHERE {readyindex.FREE} AND t.key GLOB '*[^ -~]*'"
)
"""The FREE candidates whose key holds anything but printable ASCII: a superset
of the keys that are not valid UTF-8 (`ready_apart`)."""


class SQLiteClaims(SQLiteConnection):
    if TYPE_CHECKING:

        def _queue_tables(self) -> bool: ...

    """The claim path of an `SQLiteStore`: candidates, ready figures, the pause."""

    orders_schedules = True
    """`ready_candidates` yields the Ready order of docs/design.md §8.2 and leaves out tasks
    not yet due (stores/sql/sqlite_due.py): engine/ready.py needs no scan."""

    filters_queues = True
    """`ready_candidates` takes a queue filter, applied in the index scan."""

    def ready_candidates(
        self, now: Instant | None = None, queues: QueueFilter | None = None
    ) -> Iterator[TaskState]:
        """Pending and claimed records whose direct needs are all completed and
        that are due, in Ready order (priority, due, key), read through the
        trigger-kept `ledger_due` table; with `queues`, those of the queues it
        admits only (stores/sql/queues.py `condition`)."""
        extra: tuple[str, tuple[str, ...]] | None = ("", ())
        if queues is not None:
            with self._lock:
                self._check_open()
                tables = self._queue_tables()
            if tables:
                extra = sql_queues.condition(queues.wanted, queues.skip, "?")
            elif not queues.admits(DEFAULT_QUEUE):  # no queue table: every task is in default
                extra = None
        if extra is None:
            return iter(())
        lease = sqlite_readyindex.SQLITE_LEASE
        query = due.page_sql(codec.SELECT_COLUMNS, lease, "?", extra=extra[0])
        first: tuple[str, ...] = ()
        if queues is not None and queues.wanted is not None and extra[0]:
            names = extra[1]
            if DEFAULT_QUEUE not in names:  # named queues only: read through ledger_queue
                query = sqlite_due.queue_page_sql(codec.SELECT_COLUMNS, lease, len(names))
                first, extra = names, ("", ())
        at = readyindex.sortable(now)

        def fetch(sql: str, args: tuple[Any, ...]) -> list[Any]:
            with self._lock:
                self._check_open()
                return list(self._fetchall("ready scan", sql, args))

        return due.candidates(fetch, query, "?", at, extra=extra[1], first=first)

    def ready_split(self, now: Instant) -> tuple[int, TaskState | None, Iterator[TaskState]]:
        """`ledger stats`' ready figures with the counting done in SQL: how many
        pending candidates name no needs (each one is ready), the first of them
        in Ready order, and every other candidate (claimed, or naming needs;
        in Ready order) for the caller to judge by the Ready rule.
        A key that is not valid UTF-8 (the Go service's bytes) is left out of
        the count and the first, as `claim --next` never hands one out
        (`ready_apart` counts them)."""
        with self._lock:
            self._check_open()
            ((free,),) = self._fetchall("ready count", readyindex.FREE_COUNT, ())
        pages = self._ready_pages(now, readyindex.FREE)
        first = next((r for r in pages if codec.is_utf8(r.key)), None)
        return int(free) - self.ready_apart(), first, self._ready_pages(now, readyindex.NOT_FREE)

    def ready_apart(self) -> int:
        """How many pending candidates naming no needs have a key that is not
        valid UTF-8: a GLOB in SQL finds the keys with any byte outside
        printable ASCII (few), Python judges those."""
        with self._lock:
            self._check_open()
            rows = self._fetchall("ready count", _READY_ODD_KEYS, ())
        keys = (codec.read_text(row[0], "(ready)", "key") for row in rows)
        return sum(not codec.is_utf8(key) for key in keys)

    def _ready_pages(self, now: Instant | None, only: str | None) -> Iterator[TaskState]:
        sql = readyindex.page_sql(
            codec.SELECT_COLUMNS, "?", sqlite_readyindex.SQLITE_LEASE, lock=False, only=only
        )
        at = readyindex.sortable(now)

        def fetch(created: str, key: str, limit: int) -> list[Any]:
            with self._lock:
                self._check_open()
                return list(self._fetchall("ready scan", sql, (created, key, at, limit)))

        return readyindex.candidates(fetch, 16)

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        """The pause (docs/design.md §8.3; stores/sql/pause.py); a `--next` claim reads it in
        its BEGIN IMMEDIATE batch, which `pause` cannot interleave with."""
        with self._lock:
            self._check_open()
            rows = self._fetchall("pause", pause.READ, ())
        return pause.state_of(rows[0] if rows else None)

    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        with self.batch(), self._lock, self._errors("pause"):
            self._conn.execute(pause.WRITE_SQLITE, pause.params(state))
