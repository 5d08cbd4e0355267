"""The five statuses of a record (Go's `machine.Status` constants).

The engine compares records' statuses with the plain strings below. The
public `Status` (an `enum.StrEnum`, SPEC §1; engine/statusenum.py) is
loaded when first asked for: `import enum` costs a hot command's start-up
more than a millisecond, and no hot command needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger_cli.engine.statusenum import Status as Status

PENDING = "pending"
CLAIMED = "claimed"
COMPLETED = "completed"
FAILED = "failed"
BLOCKED = "blocked"

KNOWN: frozenset[str] = frozenset({PENDING, CLAIMED, COMPLETED, FAILED, BLOCKED})
TERMINAL: frozenset[str] = frozenset({COMPLETED, FAILED, BLOCKED})
"""Blocked counts as terminal (Admit never rebases it; the walk skips it)."""


def is_terminal(status: str) -> bool:
    return status in TERMINAL


def is_known(status: str) -> bool:
    return status in KNOWN


def __getattr__(name: str) -> object:
    if name == "Status":
        from ledger_cli.engine.statusenum import Status

        return Status
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
