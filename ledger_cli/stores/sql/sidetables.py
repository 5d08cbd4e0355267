"""The SQL store's side tables, for both dialects: schedules, queues and limits,
the pruned marks, and the ready index's upkeep.

`SqlSideTables` reads and writes `ledger_schedule` (docs/design.md §8.1;
schedules.py) and `ledger_queue` / `ledger_limit` / `ledger_revoked` (docs/design.md
§8.7; queues.py), prunes records into `ledger_pruned` (docs/design.md §6.4), and checks
(`ledger doctor`) and rebuilds (`doctor --fix`) the trigger-kept ready index
and Ready order against `ledger_tasks`, with the objects, checks and range
statements each dialect declares (INDEX_DDL, INDEX_CHECKS,
INDEX_REBUILD_RANGE: *_schema.py, readyindex.py `derived`). A key PostgreSQL cannot
hold has no row there; writing one is a StoreError (dialect.py `_check_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import codec, ddl, queues, rebuildranges, schedules
from ledger_cli.stores.sql.dialect import SqlDialect

_MARK_PRUNED = "INSERT INTO ledger_pruned (key) VALUES ({p}) ON CONFLICT DO NOTHING"
_DROP_HISTORY = "DELETE FROM ledger_history WHERE key = {p}"
_STRAY_MARKS = (
    "SELECT p.key, t.status FROM ledger_pruned p LEFT JOIN ledger_tasks t ON t.key = p.key"
    " WHERE t.key IS NULL OR t.status NOT IN ('completed', 'failed') ORDER BY p.key"
)
"""Pruned marks on no record, or on one that is not finished: no prune writes
either (a prune marks a finished record it keeps); a row deleted or edited by
hand does (`ledger doctor`)."""
_UNMARK = "DELETE FROM ledger_pruned WHERE key = {p}"


class SqlSideTables(SqlDialect):
    """Schedules, queues, limits and ready-index upkeep of an SQL store."""

    INDEX_DDL: ClassVar[tuple[str, ...]]
    """The ready index's and the Ready order's tables and triggers, made again on a rebuild."""
    INDEX_CHECKS: ClassVar[tuple[tuple[str, str], ...]]
    """(what, query) pairs: each row a query returns is a problem of the index."""
    INDEX_REBUILD_RANGE: ClassVar[tuple[str, ...]]
    """The statements rebuilding one range of keys (rebuildranges.statement)."""
    REBUILD_LOCK: ClassVar[str] = ""
    """A statement holding off the writers of `ledger_tasks` during a range (none: the
    write transaction does)."""
    REBUILD_GAP: ClassVar[float] = 0.0
    """Seconds between two ranges of a rebuild, for waiting writers to get in."""

    # -- schedules (docs/design.md §8.1) -------------------------------------------

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (docs/design.md §8.1; stores/sql/schedules.py)."""
        if not self._holds(key):
            return None
        rows = self._rows("schedule", self._sql(schedules.SELECT_ONE), (key,))
        return schedules.value_of(key, *rows[0]) if rows else None

    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        self._check_text(key)
        with self.batch(), self._lock, self._errors("schedule"):
            if value is None:
                self._conn.execute(self._sql(schedules.DELETE), (key,))
            else:
                args = (key, *schedules.params(value))
                self._conn.execute(self._sql(schedules.UPSERT), args)

    def schedules(self) -> dict[str, tuple[Instant, int]]:
        rows = self._rows("schedule", schedules.SELECT_ALL)
        return {str(k): schedules.value_of(str(k), nb, p) for k, nb, p in rows}

    def has_schedules(self) -> bool:
        rows = self._rows("schedule", schedules.ANY)
        return bool(rows and rows[0][0])

    # -- queues and limits (docs/design.md §8.7) -------------------------------------

    def queue_of(self, key: str) -> str | None:
        if not self._holds(key):
            return None
        with self._lock:
            self._check_open()
            if not self._queue_tables():
                return None
            rows = self._rows("queue", self._sql(queues.SELECT_ONE), (key,))
        return str(rows[0][0]) if rows else None

    def set_queue(self, key: str, queue: str | None) -> None:
        self._set_row("queue", key, queue, queues.DELETE, queues.UPSERT)

    def queues(self) -> dict[str, str]:
        with self._lock:
            self._check_open()
            rows = self._rows("queue", queues.SELECT_ALL) if self._queue_tables() else []
        return {str(k): str(q) for k, q in rows}

    def limits(self) -> dict[str, int]:
        with self._lock:
            self._check_open()
            if self._claim_limits is not None and self._depth:
                # read with this batch's claim start (PostgreSQL `read_pause(for_claim=True)`)
                return dict(self._claim_limits)
            rows = self._rows("limit", queues.LIMITS) if self._queue_tables() else []
        return {str(q): queues.limit_of(str(q), n) for q, n in rows}

    def set_limit(self, queue: str, n: int | None) -> None:
        self._set_row("limit", queue, n, queues.DELETE_LIMIT, queues.UPSERT_LIMIT)

    def _set_row(
        self, op: str, key: str, value: str | int | None, delete: str, upsert: str
    ) -> None:
        """Upsert the (key, value) row of a queue table, or delete it for None (a
        first write makes the tables where the schema lacks them)."""
        self._check_text(key)
        if isinstance(value, str):
            self._check_text(value)
        with self.batch(), self._lock, self._errors(op):
            if value is None:
                if self._queue_tables():
                    self._conn.execute(self._sql(delete), (key,))
                return
            self._make_queue_tables()
            self._conn.execute(self._sql(upsert), (key, value))

    def held_leases(self) -> list[tuple[str, str, Instant, bool]]:
        """Every lease that may hold a slot, in one query: each claimed task's
        (key, queue, LeaseUntil, False) and each revoked lease's (key, queue,
        lease_until, True)."""
        with self._lock:
            self._check_open()
            sql = queues.CLAIMED if self._queue_tables() else queues.CLAIMED_DEFAULT
            if self._revoked_table():
                sql += queues.AND_REVOKED
            rows = self._rows("queue", sql)
        out: list[tuple[str, str, Instant, bool]] = []
        for k, q, lease, revoked in rows:
            if revoked:
                key = codec.read_text(k, "(revoked)", "key")
                out.append((key, str(q), _revoked_end(key, lease), True))
            else:
                key = codec.read_text(k, "(claimed)", "key")
                out.append((key, str(q), codec.decode_time(lease, key, "lease_until"), False))
        return out

    def revoked_leases(self) -> list[tuple[str, str, Instant]]:
        """(key, queue, lease_until) of each revoked lease kept in `ledger_revoked`
        (ended ones too, until the next revocation drops them)."""
        return [(k, q, until) for k, _, q, until in self._revoked()]

    def _revoked(self) -> list[tuple[str, object, str, Instant]]:
        with self._lock:
            self._check_open()
            rows = self._rows("revoked", queues.REVOKED) if self._revoked_table() else []
        out: list[tuple[str, object, str, Instant]] = []
        for k, fence, q, until in rows:
            key = codec.read_text(k, "(revoked)", "key")
            out.append((key, fence, str(q), _revoked_end(key, until)))
        return out

    def keep_revoked(self, key: str, fence: int, queue: str, until: Instant, now: Instant) -> None:
        """Keep the revoked lease (`key` at `fence`) until `until`, once, in the
        open transaction; drop the rows ended by `now`."""
        if not self._holds(key):
            return  # no record has such a key here: no lease to keep
        mark = self.MARK
        keep = self._sql(queues.KEEP_REVOKED)
        args = (key, codec.check_uint(fence, "fence", key), queue, codec.encode_time(until))
        with self.batch(), self._lock, self._errors("revoked"):
            if not self._revoked_table():
                self._conn.execute(ddl.revoked(ddl.SQLITE))  # only SQLite's schema lacks it
            # in one order: two revoking transactions (PostgreSQL) never wait in a circle
            ended = sorted((k, f) for k, f, _, end in self._revoked() if end <= now)
            drop = self._sql(queues.DROP_REVOKED)
            for stmt, params in [*((drop, pair) for pair in ended), (keep, args)]:
                if mark == "?" and not all(codec.is_utf8(str(p)) for p in params):
                    stmt, params = codec.raw_binding(stmt, params)  # another writer's bytes
                self._conn.execute(stmt, params)

    # -- prune (docs/design.md §6.4; engine/prune.py): pruned keys in ledger_pruned ----------

    def prune_records(self, pairs: Sequence[tuple[TaskState, TaskState]]) -> int:
        """Store each pruned record (a compare-and-swap), mark it, drop its history;
        one transaction per CHUNK records."""
        from ledger_cli.engine.prune import CHUNK

        done = 0
        for at in range(0, len(pairs), CHUNK):
            with self.batch():
                for old, new in pairs[at : at + CHUNK]:
                    if self.compare_and_swap(old.key, old, new):
                        self._mark_pruned("prune", old.key, drop_history=True)
                        done += 1
        return done

    def _mark_pruned(self, op: str, key: str, drop_history: bool = False) -> None:
        with self._errors(op):
            for stmt in (_MARK_PRUNED, _DROP_HISTORY) if drop_history else (_MARK_PRUNED,):
                sql, params = self._sql(stmt), (key,)
                if self.MARK == "?" and not codec.is_utf8(key):
                    sql, params = codec.raw_binding(sql, params)  # the Go service's bytes
                self._conn.execute(sql, params)

    def restore_pruned(self, records: Sequence[TaskState]) -> str | None:
        """Insert each pruned record where its key has none, and mark it, in one
        transaction (the caller's, when it has one; engine/prune.py `restore`):
        the first taken key (nothing of `records` written), else None."""
        try:
            with self.batch():
                for rec in records:
                    if not self.compare_and_swap(rec.key, None, rec):
                        raise _Taken(rec.key)  # rolls this block back (a savepoint in a batch)
                    self._mark_pruned("restore", rec.key)
        except _Taken as taken:
            return taken.key
        return None

    def stray_pruned_marks(self) -> list[tuple[str, str | None]]:
        """Each pruned mark whose key has no record (None) or an unfinished one
        (its status): damage that `ledger doctor` names (docs/design.md §6.4)."""
        rows = self._rows("pruned marks", _STRAY_MARKS)
        return [(codec.read_text(k, "?", "key"), None if st is None else str(st)) for k, st in rows]

    def drop_pruned_marks(self, keys: Sequence[str]) -> None:
        """Remove the pruned marks of `keys`, in one transaction (`doctor --fix`)."""
        with self.batch(), self._errors("pruned marks"):
            for key in keys:
                sql, params = self._sql(_UNMARK), (key,)
                if self.MARK == "?" and not codec.is_utf8(key):
                    sql, params = codec.raw_binding(sql, params)  # the Go service's bytes
                self._conn.execute(sql, params)

    # -- the ready index (`ledger doctor`) ---------------------------------------------

    def check_ready_index(self) -> list[str]:
        """Problems of the ready index against `ledger_tasks` (`ledger doctor`)."""
        return [
            f"ready index: {what}: {row[0]!r}"
            for what, sql in self.INDEX_CHECKS
            for row in self._rows("ready index check", sql + " LIMIT 20")
        ]

    def rebuild_ready_index(self) -> None:
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`), in
        short blocks of keys (stores/sql/rebuildranges.py)."""
        with self.batch(), self._errors("ready index rebuild"):
            for ddl in self.INDEX_DDL:
                self._conn.execute(ddl)
        rebuildranges.run(self._rebuild_range, gap=self.REBUILD_GAP)

    def _rebuild_range(self, after: str | None, keys: int) -> str | None:
        """Rebuild the range of `keys` keys after `after` in one write transaction,
        the writers of `ledger_tasks` held off; its last key, or None when it ran
        to the end."""
        with self.batch(), self._lock, self._errors("ready index rebuild"):
            if self.REBUILD_LOCK:
                self._conn.execute(self.REBUILD_LOCK)
            mark = self.MARK
            cond, params = rebuildranges.predicate("key", (after, None), mark)
            sql = (
                f"SELECT key FROM ledger_tasks WHERE {cond} ORDER BY key LIMIT 1 OFFSET {self.MARK}"
            )
            row = self._conn.execute(sql, (*params, keys - 1)).fetchone()
            last = None if row is None else str(row[0])
            for sql in self.INDEX_REBUILD_RANGE:
                stmt, args = rebuildranges.statement(sql, (after, last), mark)
                self._conn.execute(stmt, args)
        return last


def _revoked_end(key: str, until: object) -> Instant:
    """A `ledger_revoked` row's lease_until; damage named by its table and key."""
    try:
        return Instant.parse(codec.read_text(until, key, "lease_until"))
    except ValueError:
        row = f"the ledger_revoked row of key {codec.shown(key)!r}"
        remedy = "delete the row (its lease then frees its slot at once)"
        raise codec.damaged_row(row, "lease_until", "not a time", remedy) from None


class _Taken(Exception):
    """`restore_pruned` met `key`, which has a record: its writes roll back."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key
