"""The schedules of docs/design.md §8.1/§8.2 on the SQL stores: the side table
`ledger_schedule (key, not_before, priority)`, one row per key that has a
not-before or a priority (engine/schedule.py). The Go schema of
`ledger_tasks` stays as it is; a row the Go service writes has no schedule
row, so it has priority 0 and is due at its CreatedAt. `not_before` is the
RFC3339Nano text of the instant ('' for none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql.codec import damaged_row, shown

if TYPE_CHECKING:
    from ledger_cli.errors import StoreDamageError


SELECT_ONE = "SELECT not_before, priority FROM ledger_schedule WHERE key = {p}"
SELECT_ALL = "SELECT key, not_before, priority FROM ledger_schedule"
ANY = "SELECT EXISTS (SELECT 1 FROM ledger_schedule)"
DELETE = "DELETE FROM ledger_schedule WHERE key = {p}"
UPSERT = (
    "INSERT INTO ledger_schedule (key, not_before, priority) VALUES ({p}, {p}, {p})"
    " ON CONFLICT (key) DO UPDATE SET not_before = excluded.not_before,"
    " priority = excluded.priority"
)


def value_of(key: str, not_before: object, priority: object) -> tuple[Instant, int]:
    """A fetched row's (not-before, priority); StoreDamageError naming the key
    and column when either does not decode (a hand edit: this store writes
    neither so)."""
    if type(priority) is not int:
        raise _damaged(key, "priority", "not an integer")
    if not not_before:
        return Instant.ZERO, priority
    try:
        return Instant.parse(str(not_before)), priority
    except ValueError:
        raise _damaged(key, "not_before", "not an RFC 3339 time") from None


def _damaged(key: str, column: str, detail: str) -> StoreDamageError:
    row = f"the ledger_schedule row of key {shown(key)!r}"
    remedy = "repair or delete that row (without it the task has no not-before and priority 0)"
    return damaged_row(row, column, detail, remedy)


def params(value: tuple[Instant, int]) -> tuple[str, int]:
    nb, priority = value
    return ("" if nb.is_zero() else str(nb), priority)
