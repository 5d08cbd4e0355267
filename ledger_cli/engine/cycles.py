"""Cycles of needs: refused at admission, found in a store (docs/design.md §2.2).

An extension beyond the Go package. Go's Admit writes a record whose needs
close a cycle (`admit p --needs q`, then `admit q --needs p`), and neither
task is ever ready: each waits for the other to complete. The recorded Go
traces admit such cycles, so `Ledger.admit` (Go's method, which the traces
drive) keeps doing so; `Ledger.admit_outcome`, the command line's admission,
refuses them (`CycleError`, exit 8) before it writes anything.

A cycle here is a cycle of needs among records that are not completed: a
completed record is final (no rebase changes its needs) and satisfies every
record that needs it, so a cycle through it stalls nothing, and the walk
stops there. That also keeps an admission's walk to the unfinished part of
its ancestry, however long the history behind it.

The check and the write are not one atomic step across processes: two
admits racing on different processes (or a Go writer) can still close a
cycle. `find_cycles` finds those in a store (`ledger doctor`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.record import COMPLETED
from ledger_cli.errors import CycleError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from ledger_cli.engine.record import TaskState

ARROW = " → "


def closing_cycle(
    load: Callable[[str], TaskState | None], key: str, needs: Iterable[str] | None
) -> list[str] | None:
    """The shortest cycle `[key, n1, …, key]` that giving `key` these `needs`
    would close, or None: breadth first from `needs` through the needs of
    records that are not completed, until `key` is reached."""
    parent: dict[str, str] = {}
    queue: list[str] = []  # breadth first: read from `head` on (no deque to import)
    for need in needs or ():
        if need == key:
            return [key, key]
        if need not in parent:
            parent[need] = key
            queue.append(need)
    head = 0
    while head < len(queue):
        at = queue[head]
        head += 1
        rec = load(at)
        if rec is None or rec.status == COMPLETED:
            continue
        for need in rec.needs or ():
            if need == key:
                chain = [at]
                while parent[chain[-1]] != key:
                    chain.append(parent[chain[-1]])
                chain.reverse()  # the need of `key` first, `at` last
                return [key, *chain, key]
            if need not in parent:
                parent[need] = at
                queue.append(need)
    return None


def would_close(
    load: Callable[[str], TaskState | None],
    key: str,
    needs: Iterable[str],
    dependents: Callable[[list[str]], Iterable[TaskState]] | None = None,
) -> list[str] | None:
    """The cycle that giving `key` these `needs` would close, or None. A
    need naming `key` itself is left to `TaskState.validate` (Go's message).

    `dependents` is the store's hook (the records naming any of the keys in
    their needs; engine/dependents.py): a cycle through `key` enters it from
    a record, not completed, that needs it. Without one (the usual admission:
    nothing names a new key yet) no cycle can close, and the walk up the
    needs, whose cost follows the unfinished ancestry, is skipped: else each
    admit of the next link of a long pending chain would read all of it."""
    needs = tuple(needs)
    if key in needs:
        return None
    if dependents is not None and not any(
        rec.status != COMPLETED and key in (rec.needs or ()) for rec in dependents([key])
    ):
        return None
    return closing_cycle(load, key, needs)


def cycle_error(key: str, cycle: list[str]) -> CycleError:
    return CycleError(
        f"ledger: admitting {key} would close a cycle: {describe(cycle)}", cycle=cycle
    )


def find_cycles(records: Mapping[str, TaskState]) -> list[list[str]]:
    """One cycle `[k1, …, k1]` per strongly connected group of records (not
    completed) whose needs go round, each starting at its smallest key; the
    groups in key order. Tarjan's algorithm, iterative (no recursion limit
    on a long chain)."""
    graph = {
        key: [n for n in rec.needs or () if n in records and records[n].status != COMPLETED]
        for key, rec in records.items()
        if rec.status != COMPLETED
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, i = work[-1]
            edges = graph[node]
            if i < len(edges):
                work[-1] = (node, i + 1)
                nxt = edges[i]
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph[node]:
                    groups.append(group)
    cycles = [_cycle_in(set(group), graph) for group in groups]
    return sorted(cycles)


def restored_cycle(
    load: Callable[[str], TaskState | None], tasks: Iterable[TaskState]
) -> list[str] | None:
    """A cycle that inserting `tasks` (keys the store does not hold yet) would
    leave, or None. Any such cycle goes through one of them, so their
    ancestry (the records among `tasks`, then the store's) holds it."""
    records: dict[str, TaskState] = {rec.key: rec for rec in tasks}
    new = set(records)
    queue = [n for rec in records.values() for n in rec.needs or () if n not in records]
    while queue:
        key = queue.pop()
        if key in records:
            continue
        rec = load(key)
        if rec is None:
            continue
        records[key] = rec
        if rec.status != COMPLETED:
            queue.extend(n for n in rec.needs or () if n not in records)
    for cycle in find_cycles(records):
        if new.intersection(cycle):
            return cycle
    return None


def _cycle_in(group: set[str], graph: Mapping[str, list[str]]) -> list[str]:
    """A shortest cycle through the smallest key of a strongly connected group."""
    start = min(group)
    parent: dict[str, str] = {}
    queue = [start]
    head = 0
    while head < len(queue):
        at = queue[head]
        head += 1
        for need in graph[at]:
            if need not in group:
                continue
            if need == start:
                path = [at]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                path.reverse()
                return [*path, start]
            if need not in parent:
                parent[need] = at
                queue.append(need)
    raise AssertionError("a strongly connected group has a cycle through each member")


def describe(cycle: list[str]) -> str:
    """`q → p → q`."""
    return ARROW.join(cycle)
