"""The Ready order's queries over `ledger_due`, for both dialects (docs/design.md §8.2).

`ledger_due (key, rank, due)` holds the candidates of `ledger_ready` with
rank = -priority and due = the later of CreatedAt and not-before (sortable
text), indexed by (rank, due, key); each dialect builds it and keeps it
current with its own triggers (sqlite_schema.py, postgres_schema.py). `claim
--next` walks the priority levels present, highest first (one index seek
each: `min(rank) > r`), and within a level the rows already due in (due,
key) order; rows not yet due sit at the end of their level and are never
read. What both dialects run is here: the level seek, a page of one level,
the check that every `ledger_due` row is a candidate, and the walk itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ledger_cli.engine.record import TaskState

FIRST_RANK = -1_000_001
"""Below every rank (a priority is at most 1,000,000)."""


def rows_sql(later: str, not_before: str) -> str:
    """The `ledger_due` row (key, rank, due) each candidate should have, in a
    dialect's SQL: `later` the later of two texts (max, greatest),
    `not_before` the schedule's `s.not_before` as sortable text."""
    return (
        f"SELECT r.key, -coalesce(s.priority, 0) AS rank,"
        f" {later}(r.created, coalesce({not_before}, '')) AS due"
        " FROM ledger_ready r LEFT JOIN ledger_schedule s ON s.key = r.key"
    )


def rebuild_range(rows: str) -> tuple[str, ...]:
    """The rebuild of one key range from `rows_sql` (`{key}`, `{r_key}`: its
    condition on `key`, `r.key`; stores/sql/rebuildranges.py)."""
    return (
        "DELETE FROM ledger_due WHERE {key}",
        f"INSERT INTO ledger_due (key, rank, due) {rows} WHERE {{r_key}}",
    )


def checks(rows: str) -> tuple[tuple[str, str], ...]:
    """(what, query) pairs `ledger doctor` runs against `ledger_due`."""
    return (
        (
            "a candidate missing from ledger_due (or out of its place)",
            f"SELECT x.key FROM ({rows}) x WHERE NOT EXISTS (SELECT 1 FROM ledger_due d"
            " WHERE d.key = x.key AND d.rank = x.rank AND d.due = x.due)",
        ),
        (
            "a ledger_due row that is no candidate",
            "SELECT d.key FROM ledger_due d WHERE NOT EXISTS"
            " (SELECT 1 FROM ledger_ready r WHERE r.key = d.key)",
        ),
    )


def next_rank(mark: str) -> str:
    """The next priority level present after a rank (parameter: the rank)."""
    return f"SELECT min(rank) FROM ledger_due WHERE rank > {mark}"


def level_sql(mark: str, lease: str, extra: str = "", limit: int | None = None) -> str:
    """The conditions and order of a page of one level after (due, key), leaving
    out claimed rows whose lease runs past now. Parameters: rank, now, due,
    key, now, those of `extra` (a further condition: queues.condition), and
    the limit unless given here (PostgreSQL: a literal, one generic plan)."""
    m = mark
    return (
        f"d.rank = {m} AND d.due <= {m} AND (d.due, d.key) > ({m}, {m})"
        f" AND (t.status = 'pending' OR {lease} <= {m}){extra}"
        f" ORDER BY d.due, d.key LIMIT {m if limit is None else int(limit)}"
    )


def page_sql(
    columns: str,
    lease: str,
    mark: str,
    *,
    lock: bool = False,
    limit: int | None = None,
    extra: str = "",
) -> str:
    """The next due candidates of one level (`level_sql`; `columns` of their
    row `t`), the due text last;
    with `lock`, each row locked (FOR UPDATE SKIP LOCKED: PostgreSQL)."""
    sql = (
        f"SELECT {columns}, d.due FROM ledger_due d JOIN ledger_tasks t ON t.key = d.key"
        f" WHERE {level_sql(mark, lease, extra, limit)}"
    )
    return sql + " FOR UPDATE OF t SKIP LOCKED" if lock else sql


def candidates(
    rank_after: Callable[[int], Sequence[Any] | None],
    fetch: Callable[[tuple[Any, ...]], tuple[Iterable[TaskState], Sequence[Sequence[Any]]]],
    now: str,
    page: int,
    extra: tuple[Any, ...] = (),
    first: tuple[Any, ...] = (),
    first_rank: Sequence[Any] | None = None,
) -> Iterator[TaskState]:
    """The due candidates in the Ready order: level by level, each by keyset.
    `rank_after(rank)`: the row `next_rank` reads; `fetch(args)`: a page of the
    page query, its records and rows (at most `page`); `first`, `extra`: more
    parameters of that query, before and after its own; `first_rank`: the
    first level's row, read already."""
    rank = FIRST_RANK
    found: Sequence[Any] | None
    while True:
        if first_rank is not None:
            found, first_rank = first_rank, None
        else:
            found = rank_after(rank)
        if found is None or found[0] is None:
            return
        rank = int(found[0])
        after = ("", "")
        while True:
            recs, rows = fetch((*first, rank, now, after[0], after[1], now, *extra))
            yield from recs
            if len(rows) < page:
                break
            after = (str(rows[-1][-1]), str(rows[-1][0]))
