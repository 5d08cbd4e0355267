"""Paged reads of the SQL stores: history by id, record listings by key.

A long history or listing is never held whole: `read_history_pages` reads
`ledger_history` oldest first, HISTORY_PAGE rows a statement (keyset on id),
and `read_record_pages` reads records in key order (keyset on key), a short
first page so the first row prints at once. Each takes a `fetch` callable that
runs one query under the store's lock and error mapping, so both stores share
them; nothing here imports a database driver.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, NoReturn

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreDamageError
from ledger_cli.stores.sql.codec import HISTORY_COLUMNS, read_text

HISTORY_PAGE = 1000


def read_history_pages(
    fetch: Callable[[str, tuple[Any, ...]], Sequence[Sequence[Any]]],
    mark: str,
    key: str | None,
) -> Iterator[HistoryEntry]:
    """History oldest first, read in pages by id so a long log is never held whole.

    `fetch(sql, args)` runs one query (with the store's lock and error mapping);
    `mark` is the driver's placeholder (`?` or `%s`).
    """
    last = 0
    where = "" if key is None else f"key = {mark} AND "
    sql = (
        f"SELECT id, {HISTORY_COLUMNS} FROM ledger_history"
        f" WHERE {where}id > {mark} ORDER BY id LIMIT {mark}"
    )
    while True:
        args = (last, HISTORY_PAGE) if key is None else (key, last, HISTORY_PAGE)
        rows = fetch(sql, args)
        for row in rows:
            yield history_entry(row)
        if len(rows) < HISTORY_PAGE:
            return
        last = int(rows[-1][0])


RECORD_PAGE = 1000
"""Rows per page when a record listing is read by key (`visible_range`)."""
FIRST_RECORD_PAGE = 100
"""Rows of the first page: decoding 1000 rows before printing the first took
about 9 ms; a short first page puts the first row out in about 1 ms."""


def read_record_pages(
    fetch: Callable[[str, tuple[Any, ...]], tuple[list[TaskState], int, str]],
    sql: str,
    after: str = "",
    among: tuple[str, ...] = (),
) -> Iterator[TaskState]:
    """Records in key order after `after`, read in pages (keyset: `sql` takes the
    last key seen, then `among`, then the page size), so a long listing is never
    held whole; the first page is short, so the first row comes at once.
    `fetch` returns a page's records, its number of rows and its last row's key:
    a row a listing went around (docs/design.md §5.5) still moves the keyset on."""
    size = min(FIRST_RECORD_PAGE, RECORD_PAGE)
    while True:
        page, rows, last = fetch(sql, (after, *among, size))
        yield from page
        if rows < size:
            return
        after = last
        size = RECORD_PAGE


def history_entry(row: Sequence[Any]) -> HistoryEntry:
    """A `SELECT id, {HISTORY_COLUMNS}` row as the entry every store returns.
    A row that does not decode (a time that is not RFC 3339, a fence that is
    not a whole number from 0, a column that is not text) is damage naming
    the row (`log` and `doctor` exit 9), as the JSON store's corrupt history
    line is: never shown as it is."""
    rid, time, actor, event, key, fence, data = row[:7]
    texts = {"time": time, "actor": actor, "event": event, "key": key, "data": data}
    for column, value in texts.items():
        if not isinstance(value, str):
            if not isinstance(value, (bytes, bytearray, memoryview)):
                _corrupt(rid, column, "not text")
            texts[column] = read_text(value, "?", column)
    if not _is_time(texts["time"]):
        _corrupt(rid, "time", "not an RFC 3339 time")
    if isinstance(fence, bool) or not isinstance(fence, (int, Decimal)) or fence < 0:
        _corrupt(rid, "fence", "not a whole number from 0")
    if fence != int(fence):
        _corrupt(rid, "fence", "not a whole number from 0")
    return HistoryEntry(
        texts["time"], texts["actor"], texts["event"], texts["key"], int(fence), texts["data"]
    )


@functools.lru_cache(maxsize=4096)
def _is_time(text: str) -> bool:
    """Whether `text` is an RFC 3339 time (a write's lines repeat one `now`)."""
    try:
        Instant.parse(text)
    except ValueError:
        return False
    return True


def _corrupt(rid: object, column: str, detail: str) -> NoReturn:
    raise StoreDamageError(
        f"ledger: ledger_history row {rid}: corrupt history entry ({column} is {detail});"
        " repair that row in place (or delete it: its writes then have no history line)"
    )
