"""The public `Status` enum and the plain strings the engine compares (record.py)."""

from __future__ import annotations

from ledger_cli.engine import record, status


def test_each_member_is_the_engines_string() -> None:
    from ledger_cli import Status

    assert [str(s) for s in Status] == [
        record.PENDING, record.CLAIMED, record.COMPLETED, record.FAILED, record.BLOCKED
    ]  # fmt: skip
    assert frozenset(Status) == record.KNOWN
    assert status.Status is Status and Status("failed") is Status.FAILED
