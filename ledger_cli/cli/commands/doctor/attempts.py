"""`ledger doctor`'s check of the attempts (docs/design.md §7.1): attempts whose key has
no record are a note, and `--fix` removes them (`prune` drops a pruned key's
attempts itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.errors import StoreError

if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.engine.store import Store


def check_attempts(store: Store, found: Findings, fix: bool) -> None:
    """Attempts of keys that have no record: a note (`--fix` removes them)."""
    from ledger_cli.stores.attemptlog import attempt_log

    try:
        log = attempt_log(store)
        orphans = [key for key in log.attempt_keys() if store.load(key) is None]
    except StoreError as exc:
        found.problems.append(output.one_line(str(exc)))
        return
    if fix and orphans:
        log.remove_attempts(orphans)
        found.fixed.extend(
            f"removed the attempts of {key!r}, which has no record" for key in orphans
        )
        return
    found.notes.extend(
        f"attempts of {key!r}, which has no record (--fix removes them)" for key in orphans
    )
