"""`ledger blocked KEY`: print the blocking key and exit 0, or exit 1."""

from __future__ import annotations

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
        output.line(by)  # a result line: escaped on a terminal, as stored into a pipe
    return 0 if by is not None else 1
