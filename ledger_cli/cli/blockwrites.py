"""The command line's `Blocks` driver (engine/blocks.py): a failed
completion's blocking walk, cancel, retry, prune and `doctor --fix` commit in
short blocks, as `admit --batch` and `restore` do (docs/design.md §5.4 "Short lock holds").

Each block is one `Session.write` unit (its writes and their history lines
commit together; a block the store rolled back to break a deadlock is run
again, `Session.writes`), sized by `chunks`' cost model to hold the store's
write lock for at most about `chunks.TARGET_HOLD` seconds, and the lock stays
free for `chunks.gap_for(store)` seconds between two blocks so that writers
polling for it (SQLite's busy handler, the Go service's) get in. The reads
between blocks (dependents walks, `settle`'s scans) hold no write lock.

Inside a unit the command already opened (`ledger run`'s completion), `one`
and `each` run in that unit, and `after` waits for its commit: the failed
completion commits alone, then its walk runs in blocks (`Session._unit`).

No typing import at module level: every command's session makes one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from contextlib import AbstractContextManager
    from typing import Protocol, TypeVar

    from ledger_cli.cli.chunks import _Cost
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.store import Store

    T = TypeVar("T")
    R = TypeVar("R")

    class Session(Protocol):
        """What the driver needs of its `context.Session` (named by shape, so
        this module need not import the one that imports it)."""

        store: Store

        def now(self) -> Instant: ...
        def unit_open(self) -> bool: ...
        def defer(self, fn: Callable[[], object]) -> None: ...
        def writes(self, now: Instant | None) -> Iterator[AbstractContextManager[object]]: ...


class SessionBlocks:
    """A session's driver. `blocks`, `items` and `longest` (seconds, commit
    included) tell what its blocks did, for tests and benchmarks; `now` is the
    history's time of its blocks (None: the session's clock, read once)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.now: Instant | None = None
        self.blocks = 0
        self.items = 0
        self.longest = 0.0
        self.sizes: list[int] = []
        """Items per block of `each` and `runs`, in order."""
        self._last: float | None = None  # when the last block committed

    # -- the Blocks protocol --------------------------------------------------------

    def one(self, fn: Callable[[], R]) -> R:
        s = self.session
        if s.unit_open():
            return fn()
        self._pause()
        result: R | None = None
        entered = 0.0
        for attempt in s.writes(self._now()):
            with attempt:
                entered = time.monotonic()
                result = fn()
        self._done(1, time.monotonic() - entered)
        return result  # type: ignore[return-value]

    def each(self, items: Sequence[T], work: Callable[[T], R]) -> list[R]:
        s = self.session
        if s.unit_open() or not items:
            return [work(item) for item in items]
        from ledger_cli.cli.chunks import FIRST_ITEMS, TARGET_HOLD, _Cost

        cost = _Cost()
        cap = FIRST_ITEMS
        tail = 0.0  # seconds per item the unit spends after the work (history, commit)
        results: list[R] = []
        at = 0
        while at < len(items):
            self._pause()
            part: list[R] = []
            entered = worked = 0.0
            for attempt in s.writes(self._now()):
                part = []  # a rolled-back run's results are gone with its writes
                with attempt:
                    entered = time.monotonic()
                    for i in range(at, len(items)):
                        part.append(work(items[i]))
                        spent = time.monotonic() - entered
                        if len(part) >= cap or spent + tail * len(part) >= TARGET_HOLD:
                            break
                    worked = time.monotonic()
            done = time.monotonic()
            hold = done - entered
            # The history lines and the commit follow the work inside the hold:
            # the next block stops its work early enough to leave them room.
            tail = max(tail * 0.5, (done - worked) / len(part))
            self._done(len(part), hold)
            cap = self._next(cost, len(part), hold)
            results += part
            at += len(part)
        return results

    def runs(self, items: Sequence[T], work: Callable[[Sequence[T]], int]) -> int:
        from ledger_cli.cli.chunks import FIRST_ITEMS, _Cost
        from ledger_cli.engine.prune import CHUNK

        cost = _Cost()
        cap = FIRST_ITEMS
        total = 0
        at = 0
        while at < len(items):
            self._pause()
            n = min(cap, CHUNK, len(items) - at)  # the store commits CHUNK at most at once
            entered = time.monotonic()
            total += work(items[at : at + n])
            hold = time.monotonic() - entered
            self._done(n, hold)
            cap = self._next(cost, n, hold)
            at += n
        return total

    def after(self, fn: Callable[[], object]) -> None:
        s = self.session
        if s.unit_open():
            s.defer(fn)
        else:
            fn()

    # -- pacing -------------------------------------------------------------------

    def _now(self) -> Instant:
        if self.now is None:
            self.now = self.session.now()
        return self.now

    def _pause(self) -> None:
        """Leave the lock free for the store's gap after the last block."""
        if self._last is None:
            return
        from ledger_cli.cli.chunks import gap_for

        wait = gap_for(self.session.store) - (time.monotonic() - self._last)
        if wait > 0:
            time.sleep(wait)

    def _done(self, n: int, hold: float) -> None:
        self._last = time.monotonic()
        self.blocks += 1
        self.items += n
        self.sizes.append(n)
        self.longest = max(self.longest, hold)

    @staticmethod
    def _next(cost: _Cost, n: int, hold: float) -> int:
        from ledger_cli.cli.chunks import TARGET_HOLD

        if n <= 0:
            return 1
        cost.add(n, max(hold, 1e-9))
        return cost.next_size(n, TARGET_HOLD)
