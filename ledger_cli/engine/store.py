"""The Store protocol: the one port through which the engine touches state.

Backends live in `ledger_cli.stores`; the engine depends only on this protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ledger_cli.engine.record import TaskState

if TYPE_CHECKING:
    from collections.abc import Iterator
    from contextlib import AbstractContextManager


@runtime_checkable
class Store(Protocol):
    """A record backend with compare-and-swap on (sequence, status, fence, rev).

    - `load(key)`: the stored record, or None.
    - `compare_and_swap(key, old, new)`: `old=None` inserts only when the key is
      absent; otherwise the stored record must match `old` on
      `(sequence, status, fence, rev)`. A success stores `new` with `rev` set to
      the stored rev + 1 (an insert: 0) and returns True; a mismatch returns
      False and writes nothing.
    - `range()`: a consistent point-in-time view, sorted by key (UTF-8 order).
    - `batch()`: group commit; writes inside the block are durable together
      when it exits. A pass-through where nothing is needed.
    """

    def load(self, key: str) -> TaskState | None: ...

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool: ...

    def range(self) -> Iterator[TaskState]: ...

    def batch(self) -> AbstractContextManager[None]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...


def set_side_entry(store: object, method: str, what: str, key: str, value: object) -> None:
    """`store.method(key, value)`: keep (None: clear) a side entry of `key`,
    its schedule or its queue. A store without that optional method keeps
    none, so only a clearing is no error there."""
    set_ = getattr(store, method, None)
    if set_ is None:
        if value is None:
            return
        from ledger_cli.errors import StoreError

        raise StoreError(f"ledger: this store ({type(store).__name__}) keeps no {what}")
    set_(key, value)
