"""`ledger doctor`'s checks of an SQLite file: its pages (docs/reliability.md,
"The SQLite rows"), SQLite's own `PRAGMA quick_check`, and keys stored as a
BLOB (`check_key_types`).

Reading every row, as the other checks do, goes through each table's pages
but not through every index's (nor `sqlite_sequence`'s, nor the queue
table's when no task has a queue): a zeroed index page left `doctor` saying
"no problems found" while `admit` and `log` exited 9. Each line the check
returns is a problem (the first few, clipped, then how many more). `--fix`
leaves the file as it is: what a damaged page held is gone, so the line says
to restore the store from a backup or a snapshot. PostgreSQL has no such
check; a store without `quick_check` is not checked here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.cli.commands.doctor.findings import Findings

SHOWN = 3
"""The check's lines shown one by one; the rest are counted."""
MOST = 100
"""The lines asked of SQLite (it stops there); a count past it reads "or more"."""
WIDTH = 160
"""A line of SQLite's is clipped to this many characters."""
REMEDY = (
    "the database file is damaged: restore it from a backup, or into a new file"
    " from a `ledger snapshot` taken before the damage (doctor --fix cannot repair it)"
)


def check_pages(store: object, path: str, found: Findings) -> None:
    """A problem per line of SQLite's quick_check (the first SHOWN), then a count."""
    check: Callable[[int], list[str]] | None = getattr(store, "quick_check", None)
    if check is None:
        return
    lines = check(MOST)
    if not lines:
        return
    head = f"sqlite store {path}: SQLite's quick_check:"
    for line in lines[:SHOWN]:
        found.problems.append(f"{head} {output.clip(line, WIDTH)}")
    more = len(lines) - SHOWN
    if more > 0:
        most = " or more" if len(lines) >= MOST else ""
        found.problems.append(f"{head} {more}{most} more lines like these")
    found.problems.append(f"sqlite store {path}: {REMEDY}")


def check_key_types(store: object, path: str, found: Findings) -> None:
    """A problem per row whose key SQLite holds as a BLOB (the first SHOWN,
    then a count): no command reaches it, and `admit` of the same text writes
    a second row. `--fix` leaves it: which of the two rows to keep is the
    user's choice."""
    check: Callable[[int], list[bytes]] | None = getattr(store, "blob_keys", None)
    if check is None:
        return
    keys = check(MOST)
    if not keys:
        return
    from ledger_cli.stores.sql.codec import hex_bytes, lossless_text

    for key in keys[:SHOWN]:
        named, blob = hex_bytes(lossless_text(key)), f"x'{key.hex()}'"
        found.problems.append(
            f"sqlite store {path}: record key {blob} ('{named}') is stored as a BLOB,"
            " not text: no command names it and `admit` of that key writes a second row;"
            f" repair it (UPDATE ledger_tasks SET key = CAST(key AS TEXT) WHERE key = {blob},"
            " once no row holds that text)"
        )
    more = len(keys) - SHOWN
    if more > 0:
        most = " or more" if len(keys) >= MOST else ""
        found.problems.append(f"sqlite store {path}: {more}{most} more keys stored as a BLOB")
