"""The append-only history of writes made through the command line.

`HistoryEntry` is a record the stores keep, as `TaskState` is, so it is
defined here, beside the Store protocol, for stores and CLI alike. Every
store keeps one (the JSON store as a JSON-lines file beside its records,
appended under its lock; SQL stores as a table; MemStore in memory). The CLI
appends one entry per event inside the same `store.batch()` as the write.

No `from __future__ import annotations` here: the annotations of a
`typing.NamedTuple` are evaluated (see engine/record.py, and CONTRIBUTING,
"Start-up").
"""

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Self

if TYPE_CHECKING:
    from typing import Protocol


class HistoryEntry(NamedTuple):
    """One accepted write: when, who, which event, which key, at which fence.
    An immutable typing.NamedTuple (see CONTRIBUTING, start-up)."""

    time: str  # RFC3339Nano, the `now` of the write
    actor: str
    event: str  # a `ledger.*` event name
    key: str
    fence: int
    data: str  # the event's exact text

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` (`NamedTuple._replace`)."""
        return self._replace(**changes)

    def to_obj(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__match_args__}

    def to_json(self) -> str:
        return json.dumps(self.to_obj(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> Self:
        """The inverse of `to_obj` (a JSON line of the history file)."""
        return cls.from_values(*[obj[name] for name in cls._fields])

    @classmethod
    def from_values(
        cls, time: Any, actor: Any, event: Any, key: Any, fence: Any, data: Any
    ) -> Self:
        """An entry from a store's values in field order (a JSON object's, an
        SQL row's), each made its field's type: one rule for every store."""
        return cls(str(time), str(actor), str(event), str(key), int(fence), str(data))


def history_bounds(store: object, keys: Iterable[str]) -> dict[str, int]:
    """The highest fence each of `keys` has in the store's history, where it
    has one (a claim's line carries the fence it granted, committed with the
    record). A key whose record was lost (its file gone, its row deleted)
    still shows there every fence the lost record granted; restoring it at a
    lower fence would let a claim hand one out again, and the worker still
    holding it would complete over the new holder (docs/design.md §2.9:
    `Ledger.restore` and `ledger restore` raise an inserted record's fence
    to it).
    The SQL stores answer through their index by key (`history_fences`);
    the others in one pass over the history."""
    wanted = set(keys)
    indexed = getattr(store, "history_fences", None)
    if indexed is not None and wanted:
        found: dict[str, int] = indexed(wanted)
        return found
    read = getattr(store, "read_history", None)
    bounds: dict[str, int] = {}
    if read is None or not wanted:
        return bounds
    for entry in read():
        if entry.key in wanted and entry.fence > bounds.get(entry.key, 0):
            bounds[entry.key] = entry.fence
    return bounds


if TYPE_CHECKING:

    class History(Protocol):
        def append_history(self, entries: Sequence[HistoryEntry]) -> None: ...

        def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]: ...

else:

    def __getattr__(name: str) -> type:
        """`History`, a runtime-checkable typing.Protocol, is built on first use: the hot
        commands never use it."""
        if name != "History":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from typing import Protocol, runtime_checkable

        @runtime_checkable
        class History(Protocol):
            def append_history(self, entries: Sequence[HistoryEntry]) -> None: ...

            def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]: ...

        globals()["History"] = History
        return History
