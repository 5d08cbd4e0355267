"""The ready index of the SQL stores (docs/design.md §6.1): side tables kept by triggers.

Two tables beside the Go schema (which stays as it is), named `ledger_*`:

- `ledger_needs (key, need)`: one row per need a task names (the edges of the
  dependency graph, read from the `needs` JSON text), indexed both ways;
- `ledger_ready (key, created)`: the *candidates*, every pending or claimed
  task whose direct needs are all completed, with `created` the task's
  CreatedAt as sortable UTC text (`YYYY-MM-DDTHH:MM:SS.nnnnnnnnn`), indexed by
  (created, key): the Ready order.

Triggers on `ledger_tasks` keep both current on every INSERT, UPDATE and
DELETE — including rows the Go service writes with plain SQL — and promote a
task's dependents when it completes. `claim --next` then reads the first
candidates in order and applies the rest of the Ready rule (an unexpired
lease, the transitive walk) to those few rows only. The tables are derived:
`ledger doctor` compares them with what the triggers would compute, and
`doctor --fix` rebuilds them.

This module holds what both backends share: the candidate conditions (LIVE,
FREE, NOT_FREE), the page queries and their keyset reader, the sortable form of
`now`, the prune-aware listing queries, and the rebuild and checks written
over a dialect's SQL for a task's needs, `unmet` and sortable CreatedAt
(`IndexSql`). Each backend's tables and triggers are in `sqlite_readyindex.py`
/ `postgres_readyindex.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState

Fetch = Callable[[str, str], tuple[Iterable[TaskState], Sequence[Sequence[Any]]]]

LIVE = "('pending', 'claimed')"


_NAMES_NEEDS = "EXISTS (SELECT 1 FROM ledger_needs n WHERE n.key = r.key)"
FREE = f"t.status = 'pending' AND NOT {_NAMES_NEEDS}"
"""A pending candidate that names no needs: ready, whatever else is in the store."""
NOT_FREE = f"(t.status <> 'pending' OR {_NAMES_NEEDS})"
"""Every other candidate: claimed, or naming needs (the Ready rule judges it)."""


class IndexSql:  # a plain class: creating a NamedTuple is slow (CONTRIBUTING, "Start-up")
    """A dialect's SQL over a task row `t` for the rebuild and the checks.

    - needs: a set-returning FROM item, aliased `j`, over the needs JSON of `t.needs`;
    - text: a condition (ending in AND) keeping the string elements of `j`, or '';
    - value: a need of `j`;
    - unmet: true when a need of `t.key` is not completed;
    - sortkey: `t.created_at` as sortable UTC text.
    """

    __slots__ = ("needs", "sortkey", "text", "unmet", "value")

    def __init__(self, *, needs: str, text: str, value: str, unmet: str, sortkey: str) -> None:
        self.needs = needs
        self.text = text
        self.value = value
        self.unmet = unmet
        self.sortkey = sortkey


def rebuild_range(d: IndexSql) -> tuple[str, ...]:
    """The rebuild of one key range (`{key}`, `{t_key}`: its condition on `key`,
    `t.key`; stores/sql/rebuildranges.py)."""
    return (
        "DELETE FROM ledger_ready WHERE {key}",
        "DELETE FROM ledger_needs WHERE {key}",
        f"INSERT INTO ledger_needs (key, need) SELECT t.key, {d.value} FROM ledger_tasks t,"
        f" {d.needs} j WHERE {d.text}{{t_key}} ON CONFLICT DO NOTHING",
        f"INSERT INTO ledger_ready (key, created) SELECT t.key, {d.sortkey}"
        f" FROM ledger_tasks t WHERE {{t_key}} AND t.status IN {LIVE} AND NOT {d.unmet}",
    )


def checks(d: IndexSql) -> tuple[tuple[str, str], ...]:
    """(what, query) pairs `ledger doctor` runs: each row found is a problem."""
    return (
        (
            "a need missing from ledger_needs",
            f"SELECT t.key FROM ledger_tasks t, {d.needs} j WHERE {d.text}NOT EXISTS"
            f" (SELECT 1 FROM ledger_needs n WHERE n.key = t.key AND n.need = {d.value})",
        ),
        (
            "a need ledger_needs holds that the task does not name",
            f"SELECT n.key FROM ledger_needs n WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t,"
            f" {d.needs} j WHERE t.key = n.key AND {d.text}{d.value} = n.need)",
        ),
        (
            "a candidate missing from ledger_ready",
            f"SELECT t.key FROM ledger_tasks t WHERE t.status IN {LIVE} AND NOT {d.unmet}"
            " AND NOT EXISTS (SELECT 1 FROM ledger_ready r"
            f" WHERE r.key = t.key AND r.created = {d.sortkey})",
        ),
        (
            "a ledger_ready row that is no candidate",
            "SELECT r.key FROM ledger_ready r WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t"
            f" WHERE t.key = r.key AND t.status IN {LIVE} AND NOT {d.unmet})",
        ),
    )


def page_sql(
    columns: str, mark: str, lease: str, *, limit: int | None = None, only: str | None = None
) -> str:
    """The next candidates after (created, key), in order, leaving out claimed
    rows whose lease (`lease`: the sortable lease_until expression) runs past
    `now`. Parameters: created, key, now (`sortable`), and the limit unless
    `limit` gives it as a literal (PostgreSQL then keeps one generic plan for
    the prepared statement instead of planning each call: half the server's
    cost of the query, measured). `only`: a further condition on the
    candidates (FREE or NOT_FREE)."""
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    which = "" if only is None else f" AND {only}"
    return (
        f"SELECT {cols}, r.created FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
        f" WHERE (r.created, r.key) > ({mark}, {mark})"
        f" AND (t.status = 'pending' OR {lease} <= {mark}){which}"
        f" ORDER BY r.created, r.key LIMIT {mark if limit is None else int(limit)}"
    )


FREE_COUNT = (
    f"SELECT count(*) FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key WHERE {FREE}"
)
"""How many FREE candidates there are: each one is ready (`ledger stats`)."""


NEVER = "9999-12-31T23:59:59.999999999"


def sortable(now: Instant | None) -> str:
    """`now` as the sortable UTC text the index compares (NEVER for None: every
    claimed candidate counts)."""
    if now is None:
        return NEVER
    secs, ns = divmod(now.unix_ns, 1_000_000_000)
    when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=secs)
    return f"{when.year:04d}-{when:%m-%dT%H:%M:%S}.{ns:09d}"


# -- reading -----------------------------------------------------------------------


def candidates(fetch: Fetch, page: int) -> Iterator[TaskState]:
    """The candidates in Ready order, read `page` rows at a time by keyset
    (`fetch(created, key)` runs the page query after that (created, key)
    under the store's lock: its records and rows). Keys are never empty:
    nothing sorts at or before ('', ''), the start."""
    after = ("", "")
    while True:
        recs, rows = fetch(*after)
        yield from recs
        if len(rows) < page:
            return
        after = (str(rows[-1][-1]), str(rows[-1][0]))


# -- prune (docs/design.md §6.4) ---------------------------------------------------------


STATUS_COUNTS_SQL = (
    "SELECT t.status, count(*) FROM ledger_tasks t WHERE NOT EXISTS"
    " (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) GROUP BY t.status"
)
"""Unpruned records by status (`ledger stats`), counted by the database."""


def visible_sql(columns: str) -> str:
    return (
        f"SELECT {columns} FROM ledger_tasks t WHERE NOT EXISTS"
        " (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) ORDER BY t.key"
    )


def pruned_sql(columns: str) -> str:
    cols = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
    return f"SELECT {cols} FROM ledger_tasks t JOIN ledger_pruned p ON p.key = t.key ORDER BY t.key"


def visible_page_sql(columns: str, mark: str, statuses: int = 0) -> str:
    """The next page of unpruned records after a key, in key order; with
    `statuses`, only those whose status is one of that many parameters
    (given after the key)."""
    among = f" AND t.status IN ({', '.join([mark] * statuses)})" if statuses else ""
    return (
        f"SELECT {columns} FROM ledger_tasks t WHERE t.key > {mark}{among} AND NOT EXISTS"
        f" (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) ORDER BY t.key LIMIT {mark}"
    )
