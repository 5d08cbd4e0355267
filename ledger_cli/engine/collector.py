"""Python's cyclic garbage collector kept out of the holds of a store's lock.

A full (generation 2) collection visits every object the process holds.
A walk over 200,000 dependents holds hundreds of thousands of them (the
dependents it read, the results of its blocks), and each collection found
nothing to free (measured: 0.44-0.85 s each, `collected=0`). When one fell
inside a block, or inside one of the JSON store's short read holds between
blocks, the store's lock was held that much longer: on the JSON store at
200,000 dependents `retry`, `cancel` and `doctor --fix` held it 1.05-1.19 s
against a 0.4 s target (`benchmarks/bench_lock_hold.py --commands walks`).

`Paused` turns the collector off for one hold and back on (if it was on)
when the last hold of the process ends: every `Session` write unit
(cli/context.py; the walks' blocks are units), prune's store calls
(cli/blockwrites.py), the blocks of `admit --batch` and `restore`
(cli/chunks.py), and every hold of the JSON store's lock
(stores/jsonfile/locking.py). Reference counting still frees everything
that is not in a cycle; a collection that falls due in a hold runs at the
first allocation after it, with no lock held. What a hold leaves
uncollected is bounded by what it allocates in its fraction of a second.

The collector is per process: holds are counted across threads, so it comes
back on only when no thread is in one.
"""

from __future__ import annotations

import _thread
import gc

_mutex = _thread.allocate_lock()
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


class Paused:
    """`with Paused():` no cyclic garbage collection inside (re-entrant)."""

    __slots__ = ()

    def __enter__(self) -> None:
        pause()

    def __exit__(self, *exc: object) -> None:
        resume()
