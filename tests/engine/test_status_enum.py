"""The public `Status` enum and the plain strings the engine compares."""

from __future__ import annotations

from ledger_cli.engine import status


def test_each_member_is_the_engines_string() -> None:
    from ledger_cli import Status

    assert [str(s) for s in Status] == [
        status.PENDING, status.CLAIMED, status.COMPLETED, status.FAILED, status.BLOCKED
    ]  # fmt: skip
    assert frozenset(Status) == status.KNOWN
    assert status.Status is Status and Status("failed") is Status.FAILED
