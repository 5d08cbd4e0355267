"""Cancel: an operator fails a task without holding its lease (SPEC §6.3).

An extension beyond the Go package. The record becomes failed with Fence+1,
so the current holder (if any) is fenced off: its renew, release and complete
are refused. Its dependents are then blocked exactly as after a failed
completion (Go's blockDependents walk, BlockedBy = the cancelled key).
"""

from __future__ import annotations

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.dependencies import block_one, dependents_walk
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import byte_order
from ledger_cli.engine.retry import reason_note
from ledger_cli.engine.serial import blocking_writes
from ledger_cli.engine.status import Status, is_terminal
from ledger_cli.errors import AlreadyFinishedError


def cancel(core: Core, actor: str, key: str, now: Instant, reason: str | None = None) -> list[str]:
    """Fail `key` (pending, claimed or blocked); return the keys it blocked, sorted.

    Under `serial.blocking_writes` (a failure and the blocks it writes)."""
    return blocking_writes(core, _cancel, core, actor, key, now, reason)


def _cancel(core: Core, actor: str, key: str, now: Instant, reason: str | None) -> list[str]:
    while True:
        cur = core.require(key)
        if cur.status in (Status.COMPLETED.value, Status.FAILED.value):
            raise AlreadyFinishedError(f"ledger: {key} is already {cur.status}")
        nxt = cur.replace(
            status=Status.FAILED.value,
            fence=cur.fence + 1,
            owner="",
            lease_until=Instant.ZERO,
            blocked_by="",
            updated_by=actor,
            updated_at=now,
        )
        nxt.validate()
        if core.store.compare_and_swap(key, cur, nxt):
            break
    core.emit(events.CANCELLED, key, f"key {key} cancelled by {actor}{reason_note(reason)}")
    found = dependents_walk(core.store, [key])
    blocked: list[str] = []
    for dep in sorted(found, key=byte_order):
        rec = found[dep]
        if is_terminal(rec.status):
            continue
        if block_one(core, actor, now, dep, rec, key):
            blocked.append(dep)
    return blocked
