"""`ledger doctor`'s check of the attempts (docs/design.md §7.1): an attempt that does
not read is a problem (`--fix` leaves it: it is the only copy); attempts
whose key has no record are a note, and `--fix` removes them (`prune` drops
a pruned key's attempts itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.engine.store import Store


def check_attempts(store: Store, found: Findings, fix: bool, lost: set[str]) -> None:
    """Attempts of keys that have no record: a note (`--fix` removes them),
    but for `lost` keys (a record file gone that a restore may bring back,
    or `--fix --drop-damaged` drops): those are kept."""
    from ledger_cli.stores.attemptlog import attempt_log

    try:
        log = attempt_log(store)
        keys = log.attempt_keys()
        orphans = [key for key in keys if store.load(key) is None]
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    for key in keys:  # each attempt read as `state` and `output` read it
        try:
            log.list_attempts(key)
        except StoreError as exc:
            found.problems.append(output.one_line(str(exc)))
    found.notes.extend(
        f"attempts of {key!r} kept: its record is lost (see above)"
        for key in orphans
        if key in lost
    )
    orphans = [key for key in orphans if key not in lost]
    if fix and orphans:
        log.remove_attempts(orphans)
        found.fixed.extend(
            f"removed the attempts of {key!r}, which has no record" for key in orphans
        )
        return
    found.notes.extend(
        f"attempts of {key!r}, which has no record (--fix removes them)" for key in orphans
    )
