"""The dependency walks: blockingNeed, blockingAncestor, blockOne, recheckNeeds,
blockDependents (spec/engine.md §3)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.engine.status import Status, is_terminal

_BLOCKING = frozenset({Status.FAILED.value, Status.BLOCKED.value})


def blocking_need(core: Core, needs: Iterable[str] | None) -> str | None:
    """One level, in list order: the first need that is failed or blocked."""
    for need in needs or ():
        rec = core.store.load(need)
        if rec is not None and rec.status in _BLOCKING:
            return need
    return None


def blocking_ancestor(core: Core, needs: Iterable[str] | None) -> str | None:
    """Breadth-first over the transitive needs: the nearest failed/blocked key.

    Missing keys are skipped and not expanded; completed ones are walked through.
    """
    return nearest_blocking(core.store.load, needs)


def nearest_blocking(
    load: Callable[[str], TaskState | None], needs: Iterable[str] | None
) -> str | None:
    """blocking_ancestor's walk over any loader (the CLI's Ready rule uses it too)."""
    seen: set[str] = set()
    queue: deque[str] = deque()
    for need in needs or ():
        if need not in seen:
            seen.add(need)
            queue.append(need)
    while queue:
        key = queue.popleft()
        rec = load(key)
        if rec is None:
            continue
        if rec.status in _BLOCKING:
            return key
        for need in rec.needs or ():
            if need not in seen:
                seen.add(need)
                queue.append(need)
    return None


def block_one(core: Core, actor: str, now: Instant, key: str, cur: TaskState, blocker: str) -> bool:
    """Move `cur` to blocked by `blocker`; give up silently if it went terminal.

    Returns whether it wrote. Extension (SPEC §6.2): after the write, the
    blocker is read again (`reopen.confirm_block`), so that a concurrent
    `retry` cannot leave this block orphaned; without retries that read
    always finds the blocker still failed or blocked and changes nothing.
    The write and that read run under `serial.blocking_writes`.
    """
    from ledger_cli.engine.serial import blocking_writes

    with blocking_writes(core):
        return _block_one(core, actor, now, key, cur, blocker)


def _block_one(
    core: Core, actor: str, now: Instant, key: str, cur: TaskState, blocker: str
) -> bool:
    while True:
        nxt = cur.replace(
            status=Status.BLOCKED.value, blocked_by=blocker, updated_by=actor, updated_at=now
        )
        nxt.validate()
        if core.store.compare_and_swap(key, cur, nxt):
            core.emit(events.BLOCKED, key, f"key {key} blocked by {blocker}")
            from ledger_cli.engine.reopen import confirm_block

            confirm_block(core, actor, now, key, blocker)
            return True
        fresh = core.store.load(key)
        if fresh is None or is_terminal(fresh.status):
            return False
        cur = fresh


def recheck_needs(
    core: Core, actor: str, now: Instant, key: str, needs: tuple[str, ...] | None
) -> bool:
    """After a pending insert: block the record if a need failed meanwhile.

    Returns True when the record was handed to block_one.
    """
    blocker = blocking_need(core, needs)
    if blocker is None:
        return False
    cur = core.store.load(key)
    if cur is None or is_terminal(cur.status):
        return False
    block_one(core, actor, now, key, cur, blocker)
    return True


def transitive_dependents(records: list[TaskState], failed: str) -> list[str]:
    """Every key that transitively needs `failed`, sorted; status is not consulted."""
    bad = {failed}
    blocked: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rec in records:
            if rec.key in blocked or not rec.needs:
                continue
            if any(need in bad for need in rec.needs):
                blocked.add(rec.key)
                bad.add(rec.key)
                changed = True
    return sorted(blocked, key=byte_order)


def block_dependents(core: Core, actor: str, now: Instant, failed: str) -> None:
    """Complete(failed)'s walk: one Range, then block each non-terminal dependent."""
    records = list(core.store.range())
    by_key = {rec.key: rec for rec in records}
    for key in transitive_dependents(records, failed):
        rec = by_key[key]
        if is_terminal(rec.status):
            continue
        block_one(core, actor, now, key, rec, failed)
