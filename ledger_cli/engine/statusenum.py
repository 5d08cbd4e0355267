"""`Status`: the five statuses as an `enum.StrEnum` (SPEC §1), so that
`str(Status.FAILED) == "failed"`; every member equals its plain string
(engine/status.py), which is what the engine itself compares."""

from __future__ import annotations

import enum

from ledger_cli.engine import status


class Status(enum.StrEnum):
    PENDING = status.PENDING
    CLAIMED = status.CLAIMED
    COMPLETED = status.COMPLETED
    FAILED = status.FAILED
    BLOCKED = status.BLOCKED
