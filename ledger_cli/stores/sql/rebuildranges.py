"""`doctor --fix`'s rebuild of the SQL stores' ready index in short blocks
(docs/design.md §5.4 "Short lock holds").

The rebuild recomputes `ledger_needs`, `ledger_ready` and `ledger_due` from
`ledger_tasks`. In one transaction it held every writer of `ledger_tasks` off
for the whole table: 15 s at 200,000 tasks on PostgreSQL. Here it runs over
consecutive key ranges instead, each one transaction that holds the writers
off (SQLite: the database's write lock; PostgreSQL: `LOCK TABLE ledger_tasks
IN SHARE ROW EXCLUSIVE MODE`) only while it rebuilds its own range from the
committed records.

Why the result is the full rebuild's, with writers running between blocks:
- a range's rows (of all three tables) depend only on its own tasks' records
  and schedules and on the statuses of the tasks they need, all committed and
  unchanging while the block holds the lock;
- a write between blocks keeps the tables current through the triggers: for a
  range already rebuilt, from correct rows; for a range still to come, the
  block that rebuilds it later reads that write's result;
- the ranges cover every key, from before the first to after the last, so a
  row whose task no longer exists is deleted by the block whose range holds
  its key;
- `ledger` writes a key's schedule only in the transaction that writes its
  record, after the record (admission, restore), so the table lock holds
  schedule writers off too; the Go service never writes `ledger_schedule`.
A crash between blocks leaves the ranges not yet rebuilt as they were: the
next `ledger doctor` names what is still wrong.

Each block's size adapts to the store and the machine: the keys of the next
block are the last block's scaled to TARGET_HOLD, at most twice as many.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

TARGET_HOLD = 0.3
"""Seconds a block may hold the writers off (docs/design.md §5.4: about 1 s at most)."""

FIRST_KEYS = 1_000
MIN_KEYS = 200
MAX_KEYS = 200_000

Bounds = tuple[str | None, str | None]
"""A key range: (after, up to and including); None is open on that side."""


def predicate(column: str, bounds: Bounds, mark: str) -> tuple[str, tuple[str, ...]]:
    """The SQL condition of `column` within `bounds`, with its parameters
    (`mark`: the dialect's placeholder)."""
    lo, hi = bounds
    parts: list[str] = []
    params: list[str] = []
    if lo is not None:
        parts.append(f"{column} > {mark}")
        params.append(lo)
    if hi is not None:
        parts.append(f"{column} <= {mark}")
        params.append(hi)
    return (" AND ".join(parts) or "1 = 1"), tuple(params)


_COLUMNS = {"key": "key", "t_key": "t.key", "r_key": "r.key"}
"""The range placeholders of the rebuild statements, and the column each names."""


def statement(sql: str, bounds: Bounds, mark: str) -> tuple[str, tuple[str, ...]]:
    """A rebuild statement over one range: its placeholders (`{key}`, `{t_key}`,
    `{r_key}`) replaced by the range's condition on their column, with the
    parameters in order."""
    where = {name: predicate(column, bounds, mark)[0] for name, column in _COLUMNS.items()}
    args = predicate("", bounds, mark)[1]
    params = [a for _ in re.finditer(r"\{(?:key|t_key|r_key)\}", sql) for a in args]
    return sql.format(**where), tuple(params)


def run(
    block: Callable[[str | None, int], str | None],
    *,
    gap: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Call `block(after, keys)` until it returns None; each call rebuilds the
    range of up to `keys` keys after `after` (None: from the first) in one
    transaction and returns the range's last key, or None when its range ran
    to the end. Returns the number of blocks; `gap` seconds separate them."""
    after: str | None = None
    keys = FIRST_KEYS
    blocks = 0
    while True:
        started = clock()
        last = block(after, keys)
        hold = clock() - started
        blocks += 1
        if last is None:
            return blocks
        after = last
        fits = int(keys * TARGET_HOLD / hold) if hold > 0 else 2 * keys
        keys = max(MIN_KEYS, min(MAX_KEYS, 2 * keys, fits))
        if gap > 0:
            sleep(gap)  # let writers waiting for the lock in
