"""Going around an undecodable record (docs/design.md §5.5).

A listing (`ledger list`) prints every record it can decode and then fails,
naming the ones it could not: `around(store)` gives the store a `BadRows`
for the length of the listing, and the store's scans note a record that does
not decode there (its file or key, and why) instead of raising. Only a
record's own content is gone around: an I/O error, a lost connection or a
missing record still fails the scan. Outside the block (`snapshot`, `stats`,
every write) the store raises on the first bad record, as before.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from ledger_cli.errors import StoreDamageError, StoreError

if TYPE_CHECKING:
    from collections.abc import Iterator

SHOWN = 3
"""Bad records the final line names; the rest are counted."""


class BadRows:
    """The records a scan went around, each named once (a scan confirmed
    under the lock meets them again)."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}

    def note(self, name: str, exc: StoreError) -> None:
        """Record `name` (a file, a key) could not be decoded: `exc` says why."""
        self.found.setdefault(name, str(exc).removeprefix("ledger: "))

    def __len__(self) -> int:
        return len(self.found)

    def error(self, command: str) -> StoreDamageError | None:
        """The one line that ends `command` when records were gone around, else None."""
        if not self.found:
            return None
        n = len(self.found)
        why = "; ".join(list(self.found.values())[:SHOWN])
        more = f"; and {n - SHOWN} more" if n > SHOWN else ""
        records = "1 record" if n == 1 else f"{n} records"
        return StoreDamageError(
            f"ledger: {command}: {records} could not be read and "
            f"{'is' if n == 1 else 'are'} left out: {why}{more} "
            "(ledger doctor names every damaged record)"
        )


@contextlib.contextmanager
def around(store: object) -> Iterator[BadRows]:
    """The block's scans of `store` go around undecodable records, noted in
    the BadRows yielded (a store without such scans, MemStore, notes none)."""
    bad = BadRows()
    if not hasattr(store, "bad_rows"):
        yield bad
        return
    holder: Any = store  # a JSON or SQL store: its `bad_rows` attribute
    before, holder.bad_rows = holder.bad_rows, bad
    try:
        yield bad
    finally:
        holder.bad_rows = before
