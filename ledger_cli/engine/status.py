"""The public enum of the five statuses of a record: `Status`, an
`enum.StrEnum`, so `str(Status.FAILED) == "failed"` (docs/design.md §2.1).

The engine compares records' statuses, which are plain strings, with the
names in `record.py` (`PENDING`, …, `is_terminal`), each the value of its
member here; no hot command imports this module (creating an enum class is
costly at start-up).
"""

from __future__ import annotations

import enum

from ledger_cli.engine import record


class Status(enum.StrEnum):
    PENDING = record.PENDING
    CLAIMED = record.CLAIMED
    COMPLETED = record.COMPLETED
    FAILED = record.FAILED
    BLOCKED = record.BLOCKED
