"""Long walks in short write blocks (docs/design.md §5.4 "Short lock holds").

A failed completion and a cancel block every transitive dependent; a retry
un-blocks them; prune rewrites every old record. Over 200,000 records one
transaction holds a store's write lock for many seconds. The engine does not
commit (it knows only the Store protocol), so it hands its long runs of
writes to a `Blocks` driver, which decides where the transactions begin and
end. The engine stays I/O-free: the driver is the caller's (the command line's
is `cli/blockwrites.py`, sized by `cli/chunks.py`).

What a driver may assume, and the engine guarantees:
- `each(items, work)`: every `work(item)` is self-contained: it reads what it
  needs again (a compare-and-swap against a stale record fails and reloads),
  so a block may commit after any item, and a block rolled back whole may be
  run again. `work` returns its result; results come back in item order.
- `one(fn)`: `fn` is one unit (the head write of an operation and the read
  that follows it); it runs in one block.
- `runs(items, work)`: `work(slice)` commits by itself (a store's
  `prune_records`); the driver only sizes the slices and paces them.
- `after(fn)`: run `fn` once the block open now commits (at once when none is
  open): a failed completion's blocking walk follows the completion's own
  commit, as Go's walk follows its compare-and-swap.
- The reads between blocks (the dependents walk, `settle`'s scans) run with no
  block open: they see every block committed before them, which is all the
  read-after-write arguments of `reopen` need (each write and the read after
  it are separate linearizable steps, as outside any batch; on PostgreSQL
  every block that writes a block or an un-block takes `serial`'s lock).

Without a driver (`Core.blocks` None: the library's default) every operation
runs exactly as before, in the caller's batch or none: the recorded traces
replay unchanged.

What a crash between blocks leaves, and who completes it:
- blocking (failed completion, cancel): the failure is committed first, so
  every dependent not yet blocked has a failed record in its needs: never
  ready, so `claim --next` passes it by, and a claim by key blocks it (the
  claim walk) and is refused; `doctor` reports it as an escaped block and
  `--fix` blocks it.
- un-blocking (retry): the reopened record is committed first; a dependent
  still blocked is an orphaned block: `claim` refuses it as any blocked
  record, `doctor --fix` un-blocks it, and the next retry or repair that walks
  it does too.
- prune: each record is pruned by its own compare-and-swap; the rest stay
  unpruned until the next prune.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

T = TypeVar("T")
R = TypeVar("R")


class Blocks(Protocol):
    """Where an operation's transactions begin and end (module docstring)."""

    def one(self, fn: Callable[[], R]) -> R: ...

    def each(self, items: Sequence[T], work: Callable[[T], R]) -> list[R]: ...

    def runs(self, items: Sequence[T], work: Callable[[Sequence[T]], int]) -> int: ...

    def after(self, fn: Callable[[], object]) -> None: ...


class Plain:
    """No driver: everything in the caller's batch (or none), as before."""

    def one(self, fn: Callable[[], R]) -> R:
        return fn()

    def each(self, items: Sequence[T], work: Callable[[T], R]) -> list[R]:
        return [work(item) for item in items]

    def runs(self, items: Sequence[T], work: Callable[[Sequence[T]], int]) -> int:
        return work(items)

    def after(self, fn: Callable[[], object]) -> None:
        fn()


PLAIN = Plain()
