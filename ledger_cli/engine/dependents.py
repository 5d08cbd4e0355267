"""The two read-only walks of the graph of needs, over any store.

`dependents_walk`: every record that transitively needs given keys; the
failure walks (`dependencies.block_found`) and the un-blocking walks
(`reopen.settle`) both start from it. `needs_walk`: the records that given
keys transitively need, nearest first; the Ready rule and the checks of a
block look for a failure there. Both sit below `dependencies` and `reopen`.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from ledger_cli.engine.record import TaskState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator


def needs_walk(
    load: Callable[[str], TaskState | None], needs: Iterable[str] | None
) -> Iterator[tuple[str, TaskState]]:
    """Breadth first over the transitive needs of `needs`: (key, record) for
    each key once, nearest first, every status walked through; a key with no
    record is skipped and not expanded. A record's needs are read when the
    caller asks for the next one, so a caller that stops early reads no more."""
    queue = deque(dict.fromkeys(needs or ()))  # each key once, in the order given
    seen = set(queue)
    while queue:
        key = queue.popleft()
        rec = load(key)
        if rec is None:
            continue
        yield key, rec
        for need in rec.needs or ():
            if need not in seen:
                seen.add(need)
                queue.append(need)


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
    queue: list[str] = list(roots)  # breadth first from `head` on (no deque to import)
    head = 0
    while head < len(queue):
        head += 1
        for dep in needed_by.get(queue[head - 1], ()):
            if dep.key not in found:
                found[dep.key] = dep
                queue.append(dep.key)
    return found
