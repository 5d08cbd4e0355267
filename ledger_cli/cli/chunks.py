"""Long runs of writes in short transactions (docs/design.md §5.4 "Short lock holds").

`admit --batch` and `restore` write up to hundreds of thousands of records.
In one `store.batch()` that would hold the store's write lock for seconds:
a Go writer sharing the SQLite file gives up after its 5 s busy timeout, other
`ledger` processes queue behind the JSON store's lock, PostgreSQL row locks
stay held. `chunked` instead runs the work in consecutive blocks, each
committed before the next begins, each holding the lock for at most about
`TARGET_HOLD` seconds.

A block's size adapts to the store and the machine: the holds of the last
blocks (work and commit; the JSON store writes its files at commit, so its
commit has a fixed part, a sync, and a part growing with the block) give a
cost per item and a fixed cost, which size the next block to the target,
growing at most twofold per block; a block's work stops at the target in
any case. Where the fixed part alone exceeds the target (a slow sync on a
busy disk), the blocks add at most half the target to it. Between blocks the
lock stays free long enough for writers that poll for it (SQLite's busy
handler) to get in: up to `GAP` seconds, less after a short block, whose
waiters are still polling often (`gap_after`). It works above the store, the
same for JSON, SQLite and PostgreSQL.

What a caller gives up: the run is no longer all-or-nothing. Each block is
atomic; a crash or a refusal leaves the blocks committed before it. Admission
is idempotent, so re-running a batch is safe; so is re-running a restore,
which skips each key that already holds the snapshot's record and says
exactly which records landed when it stops.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

TARGET_HOLD = 0.4
"""Seconds a block may hold the write lock, commit included (docs/design.md §5.4: about 1 s)."""

FIRST_ITEMS = 32
"""Items in the first block, before the store's cost per item is known: few
enough that a commit paying an fsync a record on a busy disk (about 10 ms
each, when syncfs is not used: jsonfile/durability.py) stays near the
target; blocks double from there, a few blocks more at the start of a run."""

MIN_ITEMS = 8
"""The smallest block the cost model asks for. A block's size follows its
cost per item down to here (an fsync a record at 10 ms: about 40); a commit
whose fixed part alone is slow is met by the target/2 room in
`_Cost.next_size`, not by big blocks."""

GAP = 0.12
"""Seconds between two blocks with the lock released. SQLite has no queue of
waiting writers: each polls, its busy handler sleeping up to 100 ms between
tries (the Go driver's too), so a writer that re-takes the lock at once
starves them: measured, a waiting writer missed every gap and waited 4.9 s.
A pause longer than one poll lets every waiting writer in (~20% more time)."""

BUSY_SLEEPS = (0.001, 0.002, 0.005, 0.010, 0.015, 0.020, 0.025, 0.025, 0.025, 0.050, 0.050, 0.100)
"""The sleeps of SQLite's busy handler between a waiting writer's tries, in
order, then `0.1` each (sqlite3_busy_timeout installs it: Python's driver and
the Go service's alike)."""

MIN_GAP = 0.01
"""The shortest pause after a block, against the scheduler's delay in waking
a waiter whose sleep has ended."""

FAIR_GAP = 0.005
"""The gap on a store whose waiting writers queue in arrival order (the JSON
store's lock): a writer that re-takes the lock goes behind them anyway, so
the pause only has to let a poller outside the queue in."""


def gap_for(store: object) -> float:
    """The pause between blocks that lets `store`'s waiting writers in."""
    return FAIR_GAP if getattr(store, "fair_lock", False) is True else GAP


def gap_after(hold: float, gap: float) -> float:
    """The pause after a block that held the lock `hold` seconds, at most `gap`.
    A writer that began waiting during the block has waited at most `hold`:
    it is asleep for at most the busy handler's sleep that began last by then,
    so twice that lets it in. A run's first blocks are short (they grow from
    FIRST_ITEMS): a full GAP after each made a small batch mostly pauses."""
    waited, last = 0.0, BUSY_SLEEPS[-1]
    for pause in BUSY_SLEEPS:
        if waited > hold:
            break
        last = pause
        waited += pause
    return min(gap, max(MIN_GAP, 2 * last))


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
    committed: Callable[[], None] | None = None,
) -> Holds:
    """Call `work(item)` for every item, inside consecutive `block()`s.

    `block()` opens one write transaction (a `store.batch()`, or a session's
    `write()`, which adds the history lines to it); its exit commits. Blocks
    run one after another, each over at least one item. An exception from
    `work` leaves the current block (which discards it) and propagates: the
    blocks committed before it stay. `committed()` runs after each block's
    commit: where a block's results are reported, so that nothing is reported
    before it is durable.
    """
    holds = Holds()
    pending = _Peek(iter(items))
    cap = FIRST_ITEMS  # items in the next block
    cost = _Cost()
    while pending.has_more():
        n = 0
        with block():
            entered = clock()
            for item in pending:
                work(item)
                n += 1
                if n >= cap or clock() - entered >= target:
                    break
        hold = clock() - entered
        if committed is not None:
            committed()
        holds.blocks += 1
        holds.items += n
        holds.longest = max(holds.longest, hold)
        cost.add(n, hold)
        cap = cost.next_size(n, target)
        if gap > 0 and pending.has_more():
            sleep(gap_after(hold, gap))  # let writers waiting for the lock in
    return holds


RECENT = 4
"""Blocks whose cost per item bounds the next block's size."""


class _Cost:
    """A block's hold as `fixed + per_item * n`, fitted on the last two blocks
    of different sizes (a commit has a fixed part, a sync, and a part growing
    with the block, the files it writes)."""

    def __init__(self) -> None:
        self._points: list[tuple[int, float]] = []
        self._recent: list[float] = []
        """Hold per item of the last RECENT blocks: the dearest bounds the next
        block too (a JSON store's cost per record swings 2-5x from block to
        block with what the machine does; measured)."""

    def add(self, n: int, hold: float) -> None:
        self._points = [*[p for p in self._points if p[0] != n][-1:], (n, hold)]
        self._recent = [*self._recent[-(RECENT - 1) :], hold / n]

    def next_size(self, n: int, target: float) -> int:
        """Items for the next block: its hold near `target`; when the fixed part
        alone passes the target (a slow sync), a block's items add at most half
        the target to it. At most twice this block, never below MIN_ITEMS."""
        (n2, h2) = self._points[-1]
        fixed, per_item = 0.0, h2 / n2
        if len(self._points) == 2:
            (n1, h1) = self._points[0]
            slope = (h2 - h1) / (n2 - n1)
            if slope > 0:
                per_item = slope
                fixed = max(0.0, h2 - slope * n2)
        room = max(target - fixed, target / 2)
        fits = int(room / per_item) if per_item > 0 else 2 * n
        if n2 >= FIRST_ITEMS:  # past the start-up: never more than the dearest recent rate allows
            dearest = max(self._recent)
            if dearest > 0:
                fits = min(fits, max(int(target / dearest), n2 // 2))
        return max(MIN_ITEMS, min(fits, 2 * n))


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
