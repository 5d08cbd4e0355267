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

    return blocking_writes(core, _block_one, core, actor, now, key, cur, blocker)


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


def dependents_walk(store: object, roots: Iterable[str]) -> dict[str, TaskState]:
    """Every record that transitively needs any of `roots` (status not
    consulted; a root itself only when it is reached through needs), by key.

    Through the store's `dependents(keys)` hook when it has one (the records
    naming any of `keys` in their needs: SQL stores read their trigger-kept
    `ledger_needs` table, MemStore a reverse map), one read per level: the cost
    follows the dependents, not the store. Else one Range. Either way each
    record is read after every write that came before the call, which is all
    the read-after-write arguments (`reopen`) need.
    """
    hook = getattr(store, "dependents", None)
    found: dict[str, TaskState] = {}
    if callable(hook):
        frontier = list(dict.fromkeys(roots))
        while frontier:
            nxt: list[str] = []
            for rec in hook(frontier):
                if rec.key not in found:
                    found[rec.key] = rec
                    nxt.append(rec.key)
            frontier = nxt
        return found
    records: list[TaskState] = list(store.range())  # type: ignore[attr-defined]
    needed_by: dict[str, list[TaskState]] = {}
    for rec in records:
        for need in rec.needs or ():
            needed_by.setdefault(need, []).append(rec)
    queue: deque[str] = deque(roots)
    while queue:
        for dep in needed_by.get(queue.popleft(), ()):
            if dep.key not in found:
                found[dep.key] = dep
                queue.append(dep.key)
    return found


def block_found(core: Core, actor: str, now: Instant, failed: str) -> list[str]:
    """Block every non-terminal transitive dependent of `failed`, in key order
    (Go's blockDependents); the keys it blocked. Through `core.blocks` when set."""
    found = dependents_walk(core.store, [failed])
    todo = [
        found[dep] for dep in sorted(found, key=byte_order) if not is_terminal(found[dep].status)
    ]

    def one(rec: TaskState) -> bool:
        return block_one(core, actor, now, rec.key, rec, failed)

    done = core.blocks.each(todo, one) if core.blocks is not None else [one(r) for r in todo]
    return [rec.key for rec, wrote in zip(todo, done, strict=True) if wrote]


def block_dependents(core: Core, actor: str, now: Instant, failed: str) -> None:
    """Complete(failed)'s walk: every transitive dependent (Go: one Range; here
    `dependents_walk`), then block each non-terminal one, in key order
    (`block_found`: through `core.blocks` when set)."""
    block_found(core, actor, now, failed)
