"""The five statuses of a record (Go's `machine.Status` constants)."""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    BLOCKED = "blocked"


KNOWN: frozenset[str] = frozenset(s.value for s in Status)
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "blocked"})
"""Blocked counts as terminal (Admit never rebases it; the walk skips it)."""


def is_terminal(status: str) -> bool:
    return status in TERMINAL


def is_known(status: str) -> bool:
    return status in KNOWN
