"""`ledger renew KEY --owner O --fence F --lease D`: extend a lease you hold."""

from __future__ import annotations

from ledger_cli.cli import output
from ledger_cli.cli.context import Session, Settings
from ledger_cli.cli.inputs import owner_and_lease, parse_uint


def renew(settings: Settings, key: str, owner: str, fence: str, lease: str) -> int:
    owner, lease_td = owner_and_lease(owner, lease)
    if settings.now:  # (the clock's now cannot reach the year 9999: nothing to import)
        from ledger_cli.cli.when import check_lease

        check_lease(settings, lease, lease_td)
    fence_n = parse_uint(fence, "--fence")
    with Session(settings, existing=True) as s:
        for attempt in s.writes(s.unit_now()):  # now: once the write lock is held
            with attempt:
                now = attempt.clock(key)
                # An expired lease's slot may have gone to another claim: the
                # queue's limit holds for a renewal too (exit 4).
                from ledger_cli.engine import queues

                queues.check_stale_slot(s.store, key, now)
                s.ledger.renew(s.actor, key, owner, fence_n, lease_td, now)
                rec = s.load(key)
    until = str(rec.lease_until) if rec is not None else "?"
    output.written(settings.json, key, rec, f"renewed {key} until {until}")
    return 0
