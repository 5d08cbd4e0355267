"""`Status`: the five statuses as an `enum.StrEnum` (SPEC §1), so that
`str(Status.FAILED) == "failed"`. Each member equals the plain string of
engine/status.py that the engine itself compares (tests/test_status_enum.py);
engine/status.py loads this module when `Status` is first asked for."""

from __future__ import annotations

import enum


class Status(enum.StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    FAILED = "failed"
    BLOCKED = "blocked"
