"""`ledger takeover KEY --owner O --lease D`: take over a stale lease."""

from __future__ import annotations

from ledger_cli.cli.commands.claim import owner_and_lease, print_fence
from ledger_cli.cli.context import Session, Settings


def takeover(settings: Settings, key: str, owner: str, lease: str) -> int:
    owner, lease_td = owner_and_lease(owner, lease)
    with Session(settings) as s:
        now = s.now()
        for attempt in s.writes(now):
            with attempt:
                fence = s.ledger.takeover(s.actor, key, owner, lease_td, now)
                rec = s.load(key)
    print_fence(settings, key, fence, rec)
    return 0
