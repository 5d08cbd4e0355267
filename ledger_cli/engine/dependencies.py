"""The dependency walks: blockingNeed, blockingAncestor, recheckNeeds,
blockDependents (docs/design.md §2.7).

Writing one block, Go's blockOne (docs/design.md §2.7), lives in `engine/reopen.py`: with
the extension its write is followed by a read that may un-block again, and
the un-blocking walk may block again, so the two share one module. The walk
to every dependent is `engine/dependents.py`, a read below both. Both are
imported where a block is written, not at start-up.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from ledger_cli.engine.core import Core
from ledger_cli.engine.dependents import needs_walk
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import (
    BLOCKED,
    COMPLETED,
    FAILED,
    TaskState,
    byte_order,
    is_terminal,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

_BLOCKING = frozenset({FAILED, BLOCKED})


def blocking_need(core: Core, needs: Iterable[str] | None) -> str | None:
    """One level, in list order: the first need that is failed or blocked."""
    for need in needs or ():
        rec = core.store.load(need)
        if rec is not None and rec.status in _BLOCKING:
            return need
    return None


def blocking_behind(core: Core, needs: Iterable[str]) -> tuple[str | None, bool]:
    """Admission's check with `Core.behind_completed` (docs/design.md §2.2):
    breadth first over `needs` and, through completed records only, their
    own needs; the first failed or blocked key (a direct one first, in list
    order, as `blocking_need` names it), and whether every record reached is
    completed. A pending or claimed record is not walked through: a failure
    behind it blocks it, and so whatever needs it. Settled (True, no
    blocker): a completed record never changes again, so no block can follow
    the admission."""
    queue = deque(dict.fromkeys(needs))
    seen = set(queue)
    settled = True
    while queue:
        rec = core.store.load(key := queue.popleft())
        if rec is None or rec.status != COMPLETED:
            if rec is not None and rec.status in _BLOCKING:
                return key, False
            settled = False
            continue
        for need in rec.needs or ():
            if need not in seen:
                seen.add(need)
                queue.append(need)
    return None, settled


def admission_blocker(core: Core, needs: Iterable[str]) -> str | None:
    """What blocks a record admitted with `needs`: `blocking_behind`'s answer
    with `Core.behind_completed`, else Go's `blocking_need`."""
    if core.behind_completed:
        return blocking_behind(core, needs)[0]
    return blocking_need(core, needs)


def blocking_ancestor(core: Core, needs: Iterable[str] | None) -> str | None:
    """Breadth-first over the transitive needs: the nearest failed/blocked key.

    Missing keys are skipped and not expanded; completed ones are walked through.
    """
    return nearest_blocking(core.store.load, needs)


def nearest_blocking(
    load: Callable[[str], TaskState | None], needs: Iterable[str] | None
) -> str | None:
    """blocking_ancestor's walk over any loader (the CLI's Ready rule uses it too)."""
    for key, rec in needs_walk(load, needs):
        if rec.status in _BLOCKING:
            return key
    return None


def recheck_needs(
    core: Core, actor: str, now: Instant, key: str, needs: tuple[str, ...] | None
) -> bool:
    """After a pending insert: block the record if a need failed meanwhile.

    Returns True when the record was handed to block_one.
    """
    blocker = admission_blocker(core, needs or ())
    if blocker is None:
        return False
    cur = core.store.load(key)
    if cur is None or is_terminal(cur.status):
        return False
    from ledger_cli.engine.reopen import block_one

    block_one(core, actor, now, key, cur, blocker)
    return True


def block_found(core: Core, actor: str, now: Instant, failed: str) -> list[str]:
    """Block every non-terminal transitive dependent of `failed`, in key order
    (Go's blockDependents); the keys it blocked. Through `core.blocks` when set."""
    from ledger_cli.engine.dependents import dependents_walk
    from ledger_cli.engine.reopen import block_one

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
