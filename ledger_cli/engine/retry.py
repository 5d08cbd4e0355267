"""Retry: reopen a failed record and un-block what its failure blocked (docs/design.md §6.2).

An extension beyond the Go package (where a failed record is final). The
record becomes pending again with its Fence, Sequence, Task, Needs and
CreatedBy/At kept, so the next claim hands out Fence+1 and every earlier
holder stays fenced off. The concurrency argument is in `reopen`.
"""

from __future__ import annotations

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.dependencies import blocking_need
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.prune import is_pruned
from ledger_cli.engine.record import BLOCKED, FAILED, PENDING, TaskState
from ledger_cli.engine.reopen import (
    block_one,
    confirm_block,
    nearest_failed,
    settle,
    settle_in_blocks,
)
from ledger_cli.engine.serial import blocking_writes
from ledger_cli.errors import NotFailedError


def reason_note(reason: str | None) -> str:
    """The reason as it appears at the end of an event's text (history)."""
    return f" (reason: {reason})" if reason else ""


def failure_root(core: Core, rec: TaskState) -> str:
    """The failed record to retry for a blocked one: follow BlockedBy to a
    failed record; else the nearest failure in its needs; else its BlockedBy."""
    seen = {rec.key}
    cur: TaskState | None = rec
    while cur is not None and cur.status == BLOCKED and cur.blocked_by not in seen:
        seen.add(cur.blocked_by)
        nxt = core.store.load(cur.blocked_by)
        if nxt is not None and nxt.status == FAILED:
            return nxt.key
        cur = nxt
    return nearest_failed(core.store.load, rec.needs) or rec.blocked_by


def _blocker(core: Core, key: str, needs: tuple[str, ...] | None) -> str | None:
    """What blocks a reopened `key`: None unless a failed record other than
    `key` itself is in its transitive needs (a blocked need that only `key`'s
    own failure justified is about to be un-blocked; trusting it would block
    a dependency cycle on itself). Then the first failed or blocked direct
    need, as Admit names it; or the failure, when no direct need shows it."""

    def load(k: str) -> TaskState | None:
        return None if k == key else core.store.load(k)

    failure = nearest_failed(load, needs)
    if failure is None:
        return None
    return blocking_need(core, [n for n in needs or () if n != key]) or failure


def retry(core: Core, actor: str, key: str, now: Instant, reason: str | None = None) -> list[str]:
    """Reopen failed `key`; return the keys it un-blocked, sorted.

    If a failure is in the record's needs by now, the record becomes blocked
    by its failed or blocked need instead (and un-blocks nothing).
    """
    note = reason_note(reason)
    blocks = core.blocks
    if blocks is None:  # a reopen and the un-blocks after it (serial.py)
        return blocking_writes(core, _retry, core, actor, key, now, note)
    # With a driver (engine/blocks.py): the reopen commits first, then the
    # un-blocking walk's scans run between blocks of re-examinations.
    if not blocks.one(lambda: blocking_writes(core, _reopen, core, actor, key, now, note)):
        return []
    return settle_in_blocks(core, blocks, actor, now, [key], note=f" by retry of {key}{note}")


def _retry(core: Core, actor: str, key: str, now: Instant, note: str) -> list[str]:
    if not _reopen(core, actor, key, now, note):
        return []
    return settle(core, actor, now, [key], note=f" by retry of {key}{note}")


def _reopen(core: Core, actor: str, key: str, now: Instant, note: str) -> bool:
    """Reopen failed `key` (pending, or blocked by a failure in its needs);
    whether its dependents are to be settled (it became pending and stayed so)."""
    while True:
        cur = core.require(key)
        if cur.status == BLOCKED:
            root = failure_root(core, cur)
            raise NotFailedError(f"ledger: {key} is blocked by {root}; retry {root}")
        if cur.status != FAILED:
            raise NotFailedError(f"ledger: {key} is not failed (it is {cur.status})")
        if is_pruned(core.store, key):
            # Its task and needs are gone, and prune keeps every failure that
            # still blocks something (docs/design.md §6.4): nothing to reopen or un-block.
            raise NotFailedError(f"ledger: {key} is pruned (its task is gone); admit a new key")
        blocker = _blocker(core, key, cur.needs)
        nxt = cur.replace(
            status=BLOCKED if blocker is not None else PENDING,
            owner="",
            lease_until=Instant.ZERO,
            blocked_by=blocker or "",
            updated_by=actor,
            updated_at=now,
        )
        if core.swap(key, cur, nxt):
            break
    core.emit(events.RETRIED, key, f"key {key} retried by {actor}{note}")
    if blocker is not None:
        core.emit(events.BLOCKED, key, f"key {key} blocked by {blocker}")
        confirm_block(core, actor, now, key, blocker)
        return False
    # The read after the write (as Admit's recheck): a failure that landed in
    # the needs meanwhile blocks the record again.
    late = _blocker(core, key, cur.needs)
    if late is not None:
        fresh = core.store.load(key)
        if fresh is not None and fresh.status == PENDING:
            block_one(core, actor, now, key, fresh, late)
            return False
    return True
