"""The PostgreSQL store's side tables: schedules and the ready index's upkeep.

`PostgresSideTables` reads and writes `ledger_schedule` (docs/design.md §8.1;
schedules.py), and checks (`ledger doctor`) and rebuilds (`doctor --fix`)
the trigger-kept ready index and Ready order against `ledger_tasks`
(postgres_readyindex.py, postgres_due.py).
"""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql import (
    codec,
    postgres_due,
    postgres_readyindex,
    rebuildranges,
    schedules,
)
from ledger_cli.stores.sql.postgres_conn import PostgresConnection, no_nul


class PostgresSideTables(PostgresConnection):
    """Schedules and ready-index upkeep of a `PostgresStore`."""

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        """A key's not-before and priority (docs/design.md §8.1; stores/sql/schedules.py)."""
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
        """Rebuild the ready index from `ledger_tasks` (`ledger doctor --fix`), in
        short blocks of keys (stores/sql/rebuildranges.py)."""
        with self.batch(), self._errors("ready index rebuild"):
            for ddl in (*postgres_readyindex.PG_DDL, *postgres_due.DDL):
                self._conn.execute(ddl)
        rebuildranges.run(self._rebuild_range, gap=0.0)  # waiting writers queue on the lock

    def _rebuild_range(self, after: str | None, keys: int) -> str | None:
        """Rebuild the range of `keys` keys after `after` with the writers of
        `ledger_tasks` held off; its last key, or None when it ran to the end."""
        with self.batch(), self._lock, self._errors("ready index rebuild"):
            self._conn.execute("LOCK TABLE ledger_tasks IN SHARE ROW EXCLUSIVE MODE")
            cond, params = rebuildranges.predicate("key", (after, None), "%s")
            row = self._conn.execute(
                f"SELECT key FROM ledger_tasks WHERE {cond} ORDER BY key OFFSET %s LIMIT 1",
                (*params, keys - 1),
            ).fetchone()
            last = None if row is None else str(row[0])
            for sql in (*postgres_readyindex.PG_REBUILD_RANGE, *postgres_due.REBUILD_RANGE):
                stmt, args = rebuildranges.statement(sql, (after, last), "%s")
                self._conn.execute(stmt, args)
        return last
