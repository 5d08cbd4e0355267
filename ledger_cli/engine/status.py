"""The five statuses of a record (Go's `machine.Status` constants).

`Status` is the public enum (an `enum.StrEnum`, so `str(Status.FAILED) ==
"failed"`, docs/design.md §2.1). The engine compares records' statuses, which are plain
strings, with the plain-string names below, each the value of its member.
"""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    BLOCKED = "blocked"


PENDING: str = Status.PENDING.value
CLAIMED: str = Status.CLAIMED.value
COMPLETED: str = Status.COMPLETED.value
FAILED: str = Status.FAILED.value
BLOCKED: str = Status.BLOCKED.value

KNOWN: frozenset[str] = frozenset({PENDING, CLAIMED, COMPLETED, FAILED, BLOCKED})
TERMINAL: frozenset[str] = frozenset({COMPLETED, FAILED, BLOCKED})
"""Blocked counts as terminal (Admit never rebases it; the walk skips it)."""


def is_terminal(status: str) -> bool:
    return status in TERMINAL


def is_known(status: str) -> bool:
    return status in KNOWN
