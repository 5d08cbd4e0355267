"""`ledger takeover KEY --owner O --lease D`: take over a stale lease."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import owner_and_lease


def takeover(settings: Settings, key: str, owner: str, lease: str) -> int:
    owner, lease_td = owner_and_lease(owner, lease)
    if settings.now:  # (the clock's now cannot reach the year 9999: nothing to import)
        from ledger_cli.cli.when import check_lease

        check_lease(settings, lease, lease_td)
    with Session(settings, existing=True) as s:
        for attempt in s.writes(s.unit_now()):  # now: once the write lock is held
            with attempt:
                now = attempt.clock(key)
                # A stale lease's slot is its own again: refused (exit 4) only
                # when other live leases fill the queue meanwhile.
                from ledger_cli.engine import queues

                queues.check_stale_slot(s.store, key, now)
                fence = s.ledger.takeover(s.actor, key, owner, lease_td, now)
                rec = s.load(key)
    output.fence_line(settings.json, key, fence, rec)
    return 0
