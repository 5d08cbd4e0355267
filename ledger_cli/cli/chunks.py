"""Long runs of writes in short transactions (SPEC §5 "Short lock holds").

`admit --batch` and `restore` write up to hundreds of thousands of records.
In one `store.batch()` that would hold the store's write lock for seconds:
a Go writer sharing the SQLite file gives up after its 5 s busy timeout, other
`ledger` processes queue behind the JSON store's lock, PostgreSQL row locks
stay held. `chunked` instead runs the work in consecutive blocks, each
committed before the next begins, each holding the lock for at most about
`TARGET_HOLD` seconds.

A block's length is bounded by time, not by a count, so it adapts to the
store and the machine: the work of a block stops after a budget, and the
budget of the next block shrinks when the previous block's commit (the JSON
store writes its files at commit, so commit time grows with the block) made
the whole hold longer than the target. Between blocks the lock stays free
for `GAP` seconds, so writers that poll for it (SQLite's busy handler) get
in. It works above the store, the same for JSON, SQLite and PostgreSQL.

What a caller gives up: the run is no longer all-or-nothing. Each block is
atomic; a crash or a refusal leaves the blocks committed before it. Admission
is idempotent, so re-running a batch is safe; restore says exactly which
records landed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

TARGET_HOLD = 0.4
"""Seconds a block may hold the write lock, commit included (SPEC §5: about 1 s)."""

FIRST_BUDGET = 0.05
"""Seconds of work in the first block, before its commit time is known."""

MIN_BUDGET = 0.01
"""The smallest work budget: even on a very slow disk a block makes progress."""

GAP = 0.12
"""Seconds between two blocks with the lock released. SQLite has no queue of
waiting writers: each polls, its busy handler sleeping up to 100 ms between
tries (the Go driver's too), so a writer that re-takes the lock at once
starves them: measured, a waiting writer missed every gap and waited 4.9 s.
A pause longer than one poll lets every waiting writer in (~20% more time)."""


class Holds:
    """What the blocks of one run did: how many, and the longest lock hold."""

    __slots__ = ("blocks", "items", "longest")

    def __init__(self) -> None:
        self.blocks = 0
        self.items = 0
        self.longest = 0.0


def chunked(
    items: Iterable[T],
    block: Callable[[], contextlib.AbstractContextManager[object]],
    work: Callable[[T], None],
    *,
    target: float = TARGET_HOLD,
    gap: float = GAP,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Holds:
    """Call `work(item)` for every item, inside consecutive `block()`s.

    `block()` opens one write transaction (a `store.batch()`, or a session's
    `write()`, which adds the history lines to it); its exit commits. Blocks
    run one after another, each over at least one item. An exception from
    `work` leaves the current block (which discards it) and propagates: the
    blocks committed before it stay.
    """
    holds = Holds()
    it = iter(items)
    budget = min(FIRST_BUDGET, target / 2)
    pending = _Peek(it)
    while pending.has_more():
        with block():
            entered = clock()
            for item in pending:
                work(item)
                holds.items += 1
                if clock() - entered >= budget:
                    break
            worked = clock() - entered
        hold = clock() - entered
        holds.blocks += 1
        holds.longest = max(holds.longest, hold)
        # Scale the next block's work so that work + commit stays near the target.
        overhead = max(hold / worked, 1.0) if worked > 0 else 1.0
        budget = max(MIN_BUDGET, min(target / overhead, target) * 0.8)
        if gap > 0 and pending.has_more():
            sleep(gap)  # let writers waiting for the lock in
    return holds


class _Peek(Iterator[T]):
    """An iterator that can tell whether another item follows without losing it."""

    def __init__(self, it: Iterator[T]) -> None:
        self._it = it
        self._next: list[T] = []

    def has_more(self) -> bool:
        if self._next:
            return True
        for item in self._it:
            self._next.append(item)
            return True
        return False

    def __iter__(self) -> _Peek[T]:
        return self

    def __next__(self) -> T:
        if self._next:
            return self._next.pop()
        return next(self._it)
