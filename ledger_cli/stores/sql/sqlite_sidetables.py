"""The SQLite store's side tables: schedules and the ready index's upkeep.

`SQLiteSideTables` reads and writes `ledger_schedule` (docs/design.md §8.1;
schedules.py), and checks (`ledger doctor`) and rebuilds (`doctor --fix`)
the trigger-kept ready index and Ready order against `ledger_tasks`
(sqlite_readyindex.py, sqlite_due.py).
"""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import rebuildranges, schedules, sqlite_due, sqlite_readyindex
from ledger_cli.stores.sql.sqlite_conn import SQLiteConnection


class SQLiteSideTables(SQLiteConnection):
    """Schedules and ready-index upkeep of an `SQLiteStore`."""

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (docs/design.md §8.1; stores/sql/schedules.py)."""
        with self._lock:
            self._check_open()
            one = schedules.sql(schedules.SELECT_ONE, "?")
            rows = self._fetchall("schedule", one, (key,))
        return schedules.value_of(*rows[0]) if rows else None

    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        with self.batch(), self._lock, self._errors("schedule"):
            if value is None:
                self._conn.execute(schedules.sql(schedules.DELETE, "?"), (key,))
            else:
                args = (key, *schedules.params(value))
                self._conn.execute(schedules.sql(schedules.UPSERT, "?"), args)

    def schedules(self) -> dict[str, tuple[Instant, int]]:
        with self._lock:
            self._check_open()
            rows = self._fetchall("schedule", schedules.SELECT_ALL, ())
        return {str(k): schedules.value_of(nb, p) for k, nb, p in rows}

    def has_schedules(self) -> bool:
        with self._lock:
            self._check_open()
            rows = self._fetchall("schedule", schedules.ANY, ())
        return bool(rows and rows[0][0])

    def check_ready_index(self) -> list[str]:
        """Problems of the ready index against `ledger_tasks` (`ledger doctor`)."""
        with self._lock:
            self._check_open()
            with self._errors("ready index check"):
                return [
                    f"ready index: {what}: {row[0]!r}"
                    for what, sql in (*sqlite_readyindex.SQLITE_CHECKS, *sqlite_due.CHECKS)
                    for row in self._conn.execute(sql + " LIMIT 20").fetchall()
                ]

    def rebuild_ready_index(self) -> None:
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`), in
        short blocks of keys (stores/sql/rebuildranges.py)."""
        with self.batch(), self._errors("ready index rebuild"):
            for ddl in (
                *sqlite_readyindex.SQLITE_TABLES,
                *sqlite_readyindex.SQLITE_TRIGGERS,
                *sqlite_due.DDL,
            ):
                self._conn.execute(ddl)
        # a pause longer than one busy-handler poll lets waiting writers in (cli/chunks.py GAP)
        rebuildranges.run(self._rebuild_range, gap=0.12)

    def _rebuild_range(self, after: str | None, keys: int) -> str | None:
        """Rebuild the range of `keys` keys after `after` in one write
        transaction; its last key, or None when it ran to the end."""
        with self.batch(), self._errors("ready index rebuild"):
            cond, params = rebuildranges.predicate("key", (after, None), "?")
            row = self._conn.execute(
                f"SELECT key FROM ledger_tasks WHERE {cond} ORDER BY key LIMIT 1 OFFSET ?",
                (*params, keys - 1),
            ).fetchone()
            last = None if row is None else row[0]
            for sql in (*sqlite_readyindex.SQLITE_REBUILD_RANGE, *sqlite_due.REBUILD_RANGE):
                stmt, args = rebuildranges.statement(sql, (after, last), "?")
                self._conn.execute(stmt, args)
        return last
