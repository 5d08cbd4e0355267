"""`ledger prune` (SPEC §6.4): retention that keeps idempotency forever.

Thin: parse, call `Ledger.prune` (engine/prune.py), render.
"""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import InputError, parse_duration, parse_status


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
            from ledger_cli.cli.commands.doctor.attempts import drop_pruned_attempts

            drop_pruned_attempts(s.store)  # a pruned key's attempts go too (SPEC §7.1)
    if settings.json:
        output.json_line({"pruned": n, "dry_run": dry_run})
    else:
        output.line(f"{'would prune' if dry_run else 'pruned'} {n} records")
    return 0
