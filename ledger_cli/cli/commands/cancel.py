"""`ledger cancel KEY [--reason TEXT]`: fail a task by hand, blocking what needs it
(docs/design.md §6.3)."""

from __future__ import annotations

from ledger_cli.cli.commands.retry import remedy
from ledger_cli.cli.context import Settings


def cancel(settings: Settings, key: str, reason: str | None = None) -> int:
    return remedy(settings, key, reason, lambda s: s.ledger.cancel, "cancelled", "blocked")
