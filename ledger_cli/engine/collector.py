"""Python's cyclic garbage collector kept out of the holds of a store's lock.

A full (generation 2) collection visits every object the process holds.
A walk over a large dependency graph holds hundreds of thousands of them (the
dependents it read, the results of its blocks), and such a collection frees
nothing. When one fell inside a block, or inside one of the JSON store's short
read holds between blocks, the store's lock was held that much longer, well
over the lock-hold target (figures: docs/performance.md, bench_lock_hold.py).

Each store turns the collector off where it takes its lock, and back on
(if it was on) when the last hold of the process ends: every hold of the
JSON store's lock (stores/jsonfile/locking.py: its writes, and the short
read holds of its walks), and the outermost write transaction of SQLite
(BEGIN IMMEDIATE ... COMMIT) and PostgreSQL, both in `batch()`
(stores/sql/dialect.py). So every long write's blocks (`admit
--batch`, `restore`, the walks, prune, the ready index rebuild's ranges)
are covered, whoever drives them. Reference counting still frees everything
that is not in a cycle; a collection that falls due in a hold runs at the
first allocation after it, with no lock held. What a hold leaves
uncollected is bounded by what it allocates in its fraction of a second.

The collector is per process: holds are counted across threads, so it comes
back on only when no thread is in one.
"""

from __future__ import annotations

import gc
import threading

_mutex = threading.Lock()
_holds = 0
_was_enabled = False


def pause() -> None:
    """Enter a hold: the collector off until the matching `resume`."""
    global _holds, _was_enabled
    with _mutex:
        if _holds == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holds += 1


def resume() -> None:
    """Leave a hold: the collector as it was before the first, once none is left."""
    global _holds
    with _mutex:
        _holds -= 1
        if _holds == 0 and _was_enabled:
            gc.enable()
