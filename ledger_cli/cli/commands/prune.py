"""`ledger prune` (docs/design.md §6.4): retention that keeps idempotency forever.

Thin: parse, call `Ledger.prune` (engine/prune.py), render.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_duration, parse_status

if TYPE_CHECKING:
    from ledger_cli.engine.blocks import Blocks
    from ledger_cli.engine.store import Store


def prune(
    settings: Settings, older_than: str, statuses: list[str] | None = None, dry_run: bool = False
) -> int:
    age = parse_duration(older_than, "--older-than")
    wanted = tuple(dict.fromkeys(parse_status(st) for st in statuses or ()))
    for st in wanted:
        if st not in ("completed", "failed"):
            raise InputError(f"ledger: prune takes --status completed or failed, not {st}")
    with Session(settings) as s:
        n = s.ledger.prune(age, s.now(), wanted, dry_run)
        if not dry_run:
            # A pruned key's attempts go too (docs/design.md §7.1), in short blocks.
            drop_pruned_attempts(s.store, s.blocks)
    if settings.json:
        output.json_line({"pruned": n, "dry_run": dry_run})
    else:
        output.line(f"{'would prune' if dry_run else 'pruned'} {output.counted(n, 'record')}")
    return 0


def drop_pruned_attempts(store: Store, blocks: Blocks) -> int:
    """Remove the attempts of every pruned key; how many were removed.

    In blocks of keys, each one call of the store's `remove_attempts` (one
    short lock hold and one sync on the JSON store, one transaction on SQL),
    sized and paced by `blocks` as the prune's own record blocks are
    (docs/design.md §5.4): a running task renews its lease between them. A
    crash between blocks leaves attempts of pruned keys: a re-run of `prune`
    removes them, and `doctor` notes them (`--fix` removes them)."""
    from ledger_cli.engine.prune import is_pruned
    from ledger_cli.stores.attemptlog import attempt_log

    log = attempt_log(store)
    gone = [key for key in log.attempt_keys() if is_pruned(store, key)]
    return blocks.runs(gone, log.remove_attempts) if gone else 0
