"""`ledger check KEY --owner O --fence F` (docs/design.md §8.5): do I still hold this lease?

A validation point before a side effect (the fencing argument, for shell
scripts). It reads one record, as `state` does, and writes nothing: exit 0
printing the lease time left when KEY is claimed by O under fence F with a
live lease; 5 when F is not the current fence, O is not the holder, or the
lease has run out; 6 when KEY is not claimed; 3 with no record.
"""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import parse_uint, validate_text
from ledger_cli.errors import (
    EmptyOwnerError,
    FencedError,
    NoKeyError,
    NotClaimedError,
    state_detail,
)


def left_text(ns: int) -> str:
    """A compact duration, rounded down: 45s, 4m05s, 2h03m, 3d04h (under a second: 0s)."""
    return output.compact_duration(ns // 1_000_000_000)


def check(settings: Settings, key: str, owner: str, fence: str) -> int:
    owner = validate_text(owner, "owner")
    if owner == "":
        raise EmptyOwnerError()  # as claim refuses it: no lease is ever held by ""
    fence_n = parse_uint(fence, "--fence")
    with Session(settings, reads=True) as s:
        rec = s.load(key)
        if rec is None:
            raise NoKeyError(key=key)
        now = s.now()
    if rec.status != "claimed":
        raise NotClaimedError(detail=state_detail(key, rec.status, rec.blocked_by))
    if rec.fence != fence_n:
        raise FencedError(f"ledger: fence token is stale (the current fence is {rec.fence})")
    if rec.owner != owner:
        raise FencedError(f"ledger: {key} is held by {rec.owner}, not {owner}")
    if rec.lease_until <= now:
        raise FencedError(f"ledger: lease expired at {rec.lease_until}")
    left_ns = rec.lease_until.unix_ns - now.unix_ns
    if settings.json:
        output.json_line(
            {
                "key": key,
                "owner": owner,
                "fence": fence_n,
                "lease_until": str(rec.lease_until),
                "left_seconds": left_ns / 1e9,
            }
        )
    else:
        output.line(f"{left_text(left_ns)} left (until {rec.lease_until})")
    return 0
