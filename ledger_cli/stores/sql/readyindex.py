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
`now`, the prune-aware listing queries, and the rebuild and checks of the
ready index and the Ready order (`derived`), written over a dialect's SQL for
a task's needs, `unmet` and sortable CreatedAt (ddl.py `Types`). Each
backend's triggers are in `sqlite_schema.py` / `postgres_schema.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.sql import due
from ledger_cli.stores.sql.ddl import Types

Fetch = Callable[[str, str], tuple[Iterable[TaskState], Sequence[Sequence[Any]]]]
Checks = tuple[tuple[str, str], ...]

LIVE = "('pending', 'claimed')"


_NAMES_NEEDS = "EXISTS (SELECT 1 FROM ledger_needs n WHERE n.key = r.key)"
FREE = f"t.status = 'pending' AND NOT {_NAMES_NEEDS}"
"""A pending candidate that names no needs: ready, whatever else is in the store."""
NOT_FREE = f"(t.status <> 'pending' OR {_NAMES_NEEDS})"
"""Every other candidate: claimed, or naming needs (the Ready rule judges it)."""


def derived(t: Types) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], Checks]:
    """A dialect's statements over the ready index and the Ready order (due.py):
    the rebuild of one key range of both (`{key}`, `{t_key}`, `{r_key}`: its
    condition on `key`, `t.key`, `r.key`; stores/sql/rebuildranges.py), the
    whole rebuild of the ready index and of the Ready order (each in one
    transaction, when the side tables are installed), and the (what, query)
    pairs `ledger doctor` runs: each row found is a problem."""
    rows = due.rows_sql(t.later, t.sortkey("s.not_before"))
    ready = (
        "DELETE FROM ledger_ready WHERE {key}",
        "DELETE FROM ledger_needs WHERE {key}",
        f"INSERT INTO ledger_needs (key, need) SELECT t.key, {t.need} FROM ledger_tasks t,"
        f" {t.needs('t.needs')} j WHERE {t.strings}{{t_key}} ON CONFLICT DO NOTHING",
        f"INSERT INTO ledger_ready (key, created) SELECT t.key, {t.sortkey('t.created_at')}"
        f" FROM ledger_tasks t WHERE {{t_key}} AND t.status IN {LIVE} AND NOT {t.unmet('t.key')}",
    )
    every = {"key": t.every, "t_key": t.every, "r_key": t.every}
    return (
        (*ready, *due.rebuild_range(rows)),
        tuple(s.format(**every) for s in ready),
        tuple(s.format(**every) for s in due.rebuild_range(rows)),
        (*_checks(t), *due.checks(rows)),
    )


def _checks(t: Types) -> Checks:
    needs, text, need, unmet = t.needs("t.needs"), t.strings, t.need, t.unmet("t.key")
    return (
        (
            "a need missing from ledger_needs",
            f"SELECT t.key FROM ledger_tasks t, {needs} j WHERE {text}NOT EXISTS"
            f" (SELECT 1 FROM ledger_needs n WHERE n.key = t.key AND n.need = {need})",
        ),
        (
            "a need ledger_needs holds that the task does not name",
            f"SELECT n.key FROM ledger_needs n WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t,"
            f" {needs} j WHERE t.key = n.key AND {text}{need} = n.need)",
        ),
        (
            "a candidate missing from ledger_ready",
            f"SELECT t.key FROM ledger_tasks t WHERE t.status IN {LIVE} AND NOT {unmet}"
            " AND NOT EXISTS (SELECT 1 FROM ledger_ready r"
            f" WHERE r.key = t.key AND r.created = {t.sortkey('t.created_at')})",
        ),
        (
            "a ledger_ready row that is no candidate",
            "SELECT r.key FROM ledger_ready r WHERE NOT EXISTS (SELECT 1 FROM ledger_tasks t"
            f" WHERE t.key = r.key AND t.status IN {LIVE} AND NOT {unmet})",
        ),
    )


def page_sql(
    columns: str, mark: str, lease: str, *, limit: int | None = None, only: str | None = None
) -> str:
    """The next candidates (`columns` of their row `t`) after (created, key),
    in order, leaving out claimed rows whose lease (`lease`: the sortable
    lease_until expression) runs past `now`. Parameters: created, key, now
    (`sortable`), and the limit unless `limit` gives it as a literal
    (PostgreSQL then keeps one generic plan for the prepared statement
    instead of planning each call: half the server's cost of the query,
    measured). `only`: a further condition on the candidates (FREE or
    NOT_FREE)."""
    which = "" if only is None else f" AND {only}"
    return (
        f"SELECT {columns}, r.created FROM ledger_ready r JOIN ledger_tasks t ON t.key = r.key"
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
    return (
        f"SELECT {columns} FROM ledger_tasks t JOIN ledger_pruned p ON p.key = t.key ORDER BY t.key"
    )


def visible_page_sql(columns: str, mark: str, statuses: int = 0) -> str:
    """The next page of unpruned records after a key, in key order; with
    `statuses`, only those whose status is one of that many parameters
    (given after the key)."""
    among = f" AND t.status IN ({', '.join([mark] * statuses)})" if statuses else ""
    return (
        f"SELECT {columns} FROM ledger_tasks t WHERE t.key > {mark}{among} AND NOT EXISTS"
        f" (SELECT 1 FROM ledger_pruned p WHERE p.key = t.key) ORDER BY t.key LIMIT {mark}"
    )
