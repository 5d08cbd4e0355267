"""`ledger blocked KEY`: print the blocking key and exit 0, or exit 1."""

from __future__ import annotations

import sys

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.errors import NoKeyError


def blocked(settings: Settings, key: str) -> int:
    """Exit 0 and print the blocking key when blocked; exit 1 (silent) when not."""
    with Session(settings, reads=True) as s:
        if s.ledger.state(key) is None:
            raise NoKeyError(key=key)
        by = s.ledger.blocked(key)
    if settings.json:
        output.json_line({"key": key, "blocked": by is not None, "blocked_by": by})
    elif by is not None:
        # Escaped on a terminal (docs/design.md §5.3); a script reading it
        # from a pipe gets the key as stored.
        if sys.stdout.isatty():
            from ledger_cli.cli.render import safe

            by = safe(by)
        output.line(by)
    return 0 if by is not None else 1
