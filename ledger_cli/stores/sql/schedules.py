"""The schedules of docs/design.md §8.1/§8.2 on the SQL stores: the side table
`ledger_schedule (key, not_before, priority)`, one row per key that has a
not-before or a priority (engine/schedule.py). The Go schema of
`ledger_tasks` stays as it is; a row the Go service writes has no schedule
row, so it has priority 0 and is due at its CreatedAt. `not_before` is the
RFC3339Nano text of the instant ('' for none)."""

from __future__ import annotations

from ledger_cli.engine.instant import Instant

TABLE = "ledger_schedule"


SELECT_ONE = "SELECT not_before, priority FROM ledger_schedule WHERE key = {p}"
SELECT_ALL = "SELECT key, not_before, priority FROM ledger_schedule"
ANY = "SELECT EXISTS (SELECT 1 FROM ledger_schedule)"
DELETE = "DELETE FROM ledger_schedule WHERE key = {p}"
UPSERT = (
    "INSERT INTO ledger_schedule (key, not_before, priority) VALUES ({p}, {p}, {p})"
    " ON CONFLICT (key) DO UPDATE SET not_before = excluded.not_before,"
    " priority = excluded.priority"
)


def sql(template: str, placeholder: str) -> str:
    return template.format(p=placeholder)


def value_of(not_before: str, priority: int) -> tuple[Instant, int]:
    return (Instant.parse(not_before) if not_before else Instant.ZERO, int(priority))


def params(value: tuple[Instant, int]) -> tuple[str, int]:
    nb, priority = value
    return ("" if nb.is_zero() else str(nb), priority)
