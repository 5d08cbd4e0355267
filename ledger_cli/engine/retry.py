"""Retry: reopen a failed record and un-block what its failure blocked (SPEC §6.2).

An extension beyond the Go package (where a failed record is final). The
record becomes pending again with its Fence, Sequence, Task, Needs and
CreatedBy/At kept, so the next claim hands out Fence+1 and every earlier
holder stays fenced off. The concurrency argument is in `reopen`.
"""

from __future__ import annotations

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.dependencies import blocking_need, recheck_needs
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.reopen import confirm_block, nearest_failed, settle
from ledger_cli.engine.status import Status
from ledger_cli.errors import NotFailedError


def reason_note(reason: str | None) -> str:
    """The reason as it appears at the end of an event's text (history)."""
    return f" (reason: {reason})" if reason else ""


def failure_root(core: Core, rec: TaskState) -> str:
    """The failed record to retry for a blocked one: follow BlockedBy to a
    failed record; else the nearest failure in its needs; else its BlockedBy."""
    seen = {rec.key}
    cur: TaskState | None = rec
    while cur is not None and cur.status == Status.BLOCKED.value and cur.blocked_by not in seen:
        seen.add(cur.blocked_by)
        nxt = core.store.load(cur.blocked_by)
        if nxt is not None and nxt.status == Status.FAILED.value:
            return nxt.key
        cur = nxt
    return nearest_failed(core.store.load, rec.needs) or rec.blocked_by


def retry(core: Core, actor: str, key: str, now: Instant, reason: str | None = None) -> list[str]:
    """Reopen failed `key`; return the keys it un-blocked, sorted.

    If one of the record's own needs is failed or blocked by now, the record
    becomes blocked by it instead (and un-blocks nothing).
    """
    note = reason_note(reason)
    while True:
        cur = core.require(key)
        if cur.status == Status.BLOCKED.value:
            root = failure_root(core, cur)
            raise NotFailedError(f"ledger: {key} is blocked by {root}; retry {root}")
        if cur.status != Status.FAILED.value:
            raise NotFailedError(f"ledger: {key} is not failed (it is {cur.status})")
        blocker = blocking_need(core, cur.needs)
        nxt = cur.replace(
            status=Status.BLOCKED.value if blocker is not None else Status.PENDING.value,
            owner="",
            lease_until=Instant.ZERO,
            blocked_by=blocker or "",
            updated_by=actor,
            updated_at=now,
        )
        nxt.validate()
        if core.store.compare_and_swap(key, cur, nxt):
            break
    core.emit(events.RETRIED, key, f"key {key} retried by {actor}{note}")
    if blocker is not None:
        core.emit(events.BLOCKED, key, f"key {key} blocked by {blocker}")
        confirm_block(core, actor, now, key, blocker)
        return []
    # A need that failed while we wrote: blocked again, as Admit's recheck does.
    if recheck_needs(core, actor, now, key, cur.needs):
        return []
    return settle(core, actor, now, [key], note=f" by retry of {key}{note}")
