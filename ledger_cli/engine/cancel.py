"""Cancel: an operator fails a task without holding its lease (docs/design.md §6.3).

An extension beyond the Go package. The record becomes failed with Fence+1,
so the current holder (if any) is fenced off: its renew, release and complete
are refused. Its dependents are then blocked exactly as after a failed
completion (Go's blockDependents walk, BlockedBy = the cancelled key).
With `Core.hold_leases` (the command line), a live lease it took away is
kept as the task's not-before, which a retry leaves in place
(docs/design.md §6.3, §8.1).
"""

from __future__ import annotations

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.dependencies import block_found
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.leases import next_fence_fits
from ledger_cli.engine.record import COMPLETED, FAILED
from ledger_cli.engine.retry import reason_note
from ledger_cli.engine.serial import blocking_writes
from ledger_cli.errors import AlreadyFinishedError


def cancel(core: Core, actor: str, key: str, now: Instant, reason: str | None = None) -> list[str]:
    """Fail `key` (pending, claimed or blocked); return the keys it blocked, sorted.

    Under `serial.blocking_writes` (a failure and the blocks it writes). With
    a `Core.blocks` driver the failure commits first, then the blocks land in
    short blocks of their own (engine/blocks.py)."""
    blocks = core.blocks
    if blocks is None:
        return blocking_writes(core, _cancel, core, actor, key, now, reason)
    blocks.one(lambda: blocking_writes(core, _fail, core, actor, key, now, reason))
    return block_found(core, actor, now, key)


def _cancel(core: Core, actor: str, key: str, now: Instant, reason: str | None) -> list[str]:
    _fail(core, actor, key, now, reason)
    return block_found(core, actor, now, key)


def _fail(core: Core, actor: str, key: str, now: Instant, reason: str | None) -> None:
    while True:
        cur = core.require(key)
        if cur.status in (COMPLETED, FAILED):
            raise AlreadyFinishedError(f"ledger: {key} is already {cur.status}")
        # The bump fences off the holder; a record at the store's largest
        # fence keeps it, as no renew or completion follows a failed status.
        nxt = cur.replace(
            status=FAILED,
            fence=cur.fence + 1 if next_fence_fits(core.store, cur) else cur.fence,
            owner="",
            lease_until=Instant.ZERO,
            blocked_by="",
            updated_by=actor,
            updated_at=now,
        )
        if core.swap(key, cur, nxt):
            break
    # The holder's lease is cleared: its end is kept as a not-before, so that a
    # retry does not hand the task to `--next` while the holder may still run.
    core.dispossessed(key, cur, now)
    core.emit(events.CANCELLED, key, f"key {key} cancelled by {actor}{reason_note(reason)}")
