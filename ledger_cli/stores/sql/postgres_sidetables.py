"""The PostgreSQL store's side tables: schedules and the ready index's upkeep.

`PostgresSideTables` reads and writes `ledger_schedule` (SPEC §8.1;
schedules.py), and checks (`ledger doctor`) and rebuilds (`doctor --fix`)
the trigger-kept ready index and Ready order against `ledger_tasks`
(postgres_readyindex.py, postgres_due.py).
"""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import codec, postgres_due, postgres_readyindex, schedules
from ledger_cli.stores.sql.postgres_conn import PostgresConnection, no_nul


class PostgresSideTables(PostgresConnection):
    """Schedules and ready-index upkeep of a `PostgresStore`."""

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (SPEC §8.1; stores/sql/schedules.py)."""
        if not codec.is_utf8(key):
            return None
        with self._lock:
            self._check_open()
            with self._errors("schedule"):
                row = self._conn.execute(
                    schedules.sql(schedules.SELECT_ONE, "%s"), (key,)
                ).fetchone()
        return schedules.value_of(*row) if row is not None else None

    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        no_nul(key)
        with self.batch(), self._lock, self._errors("schedule"):
            if value is None:
                self._conn.execute(schedules.sql(schedules.DELETE, "%s"), (key,))
            else:
                args = (key, *schedules.params(value))
                self._conn.execute(schedules.sql(schedules.UPSERT, "%s"), args)

    def schedules(self) -> dict[str, tuple[Instant, int]]:
        with self._lock:
            self._check_open()
            with self._errors("schedule"):
                rows = self._conn.execute(schedules.SELECT_ALL).fetchall()
        return {str(k): schedules.value_of(nb, p) for k, nb, p in rows}

    def has_schedules(self) -> bool:
        with self._lock:
            self._check_open()
            with self._errors("schedule"):
                row = self._conn.execute(schedules.ANY).fetchone()
        return bool(row and row[0])

    def check_ready_index(self) -> list[str]:
        """Problems of the ready index against `ledger_tasks` (`ledger doctor`)."""
        with self._lock:
            self._check_open()
            with self._errors("ready index check"):
                return [
                    f"ready index: {what}: {row[0]!r}"
                    for what, sql in (*postgres_readyindex.PG_CHECKS, *postgres_due.CHECKS)
                    for row in self._conn.execute(sql + " LIMIT 20").fetchall()
                ]

    def rebuild_ready_index(self) -> None:
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`)."""
        with self.batch(), self._errors("ready index rebuild"):
            self._conn.execute("LOCK TABLE ledger_tasks IN SHARE ROW EXCLUSIVE MODE")
            for ddl in (
                *postgres_readyindex.PG_DDL,
                *postgres_readyindex.PG_REBUILD,
                *postgres_due.DDL,
                *postgres_due.REBUILD,
            ):
                self._conn.execute(ddl)
