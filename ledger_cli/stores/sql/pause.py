"""The pause of docs/design.md §8.3 on the SQL stores: the one-row table `ledger_pause`.

The row always exists (made with the schema), so that PostgreSQL claimers can
read it `FOR SHARE` and `pause`'s UPDATE waits for every claim transaction
that read it unpaused: once `pause` has committed, no such claim is left to
land. On SQLite every write transaction is BEGIN IMMEDIATE, which serialises
the same way. The Go service knows nothing of the table.
"""

from __future__ import annotations

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.sql.codec import damaged_row

REWRITE = "`ledger resume` writes it again"
"""What to do about a damaged row (cli/commands/resume.py writes over it)."""


READ = "SELECT paused, since, actor, reason FROM ledger_pause WHERE id = 1"
READ_FOR_WRITE_PG = READ + " FOR UPDATE"
"""`pause` / `resume`'s read before their write, in one transaction."""
WRITE = "UPDATE ledger_pause SET paused = {p}, since = {p}, actor = {p}, reason = {p} WHERE id = 1"


def state_of(row: tuple[object, ...] | None) -> tuple[str, str, str] | None:
    """A fetched row as the store's pause state (None while running or without a
    row); StoreDamageError when a paused row's `since` is not a time (a hand
    edit: `pause` always writes one)."""
    if row is None or not row[0]:
        return None
    try:
        Instant.parse(str(row[1]))
    except ValueError:
        raise damaged_row(
            "the ledger_pause row", "since", "not an RFC 3339 time", REWRITE
        ) from None
    return (str(row[1]), str(row[2]), str(row[3]))


def params(state: tuple[str, str, str] | None) -> tuple[int, str, str, str]:
    return (0, "", "", "") if state is None else (1, *state)
