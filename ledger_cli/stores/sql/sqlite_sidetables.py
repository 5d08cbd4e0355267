"""The SQLite store's side tables: schedules and the ready index's upkeep.

`SQLiteSideTables` reads and writes `ledger_schedule` (SPEC §8.1;
schedules.py), and checks (`ledger doctor`) and rebuilds (`doctor --fix`)
the trigger-kept ready index and Ready order against `ledger_tasks`
(sqlite_readyindex.py, sqlite_due.py).
"""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import schedules, sqlite_due, sqlite_readyindex
from ledger_cli.stores.sql.sqlite_conn import SQLiteConnection


class SQLiteSideTables(SQLiteConnection):
    """Schedules and ready-index upkeep of an `SQLiteStore`."""

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (SPEC §8.1; stores/sql/schedules.py)."""
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
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`)."""
        with self.batch(), self._errors("ready index rebuild"):
            for ddl in (
                *sqlite_readyindex.SQLITE_TABLES,
                *sqlite_readyindex.SQLITE_TRIGGERS,
                *sqlite_due.DDL,
            ):
                self._conn.execute(ddl)
            for sql in (*sqlite_readyindex.SQLITE_REBUILD, *sqlite_due.REBUILD):
                self._conn.execute(sql)
