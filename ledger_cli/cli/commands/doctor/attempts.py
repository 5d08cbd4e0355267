"""Keeping attempts in step with their records (SPEC §7.1): `prune` removes a
pruned key's attempts; `doctor` notes attempts whose key has no record and
`--fix` removes them."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.errors import StoreError

TYPE_CHECKING = False  # not typing's: importing typing costs start-up time
if TYPE_CHECKING:
    from ledger_cli.cli.commands.doctor import Findings
    from ledger_cli.engine.store import Store


def drop_pruned_attempts(store: Store) -> int:
    """Remove the attempts of every pruned key; how many were removed."""
    from ledger_cli.engine.prune import is_pruned
    from ledger_cli.stores.attempts import attempt_log

    log = attempt_log(store)
    gone = [key for key in log.attempt_keys() if is_pruned(store, key)]
    return log.remove_attempts(gone) if gone else 0


def check_attempts(store: Store, found: Findings, fix: bool) -> None:
    """Attempts of keys that have no record: a note (`--fix` removes them)."""
    from ledger_cli.stores.attempts import attempt_log

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
