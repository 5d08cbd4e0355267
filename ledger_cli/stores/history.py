"""The append-only history of writes made through the command line.

Every store keeps one (the JSON store as a JSON-lines file beside its records,
appended under its lock; SQL stores as a table; MemStore in memory). The CLI
appends one entry per event inside the same `store.batch()` as the write.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One accepted write: when, who, which event, which key, at which fence."""

    time: str  # RFC3339Nano, the `now` of the write
    actor: str
    event: str  # a `ledger.*` event name
    key: str
    fence: int
    data: str  # the event's exact text

    def to_obj(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_obj(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> HistoryEntry:
        return cls(
            time=str(obj["time"]),
            actor=str(obj["actor"]),
            event=str(obj["event"]),
            key=str(obj["key"]),
            fence=int(obj["fence"]),
            data=str(obj["data"]),
        )


@runtime_checkable
class History(Protocol):
    def append_history(self, entries: Sequence[HistoryEntry]) -> None: ...

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]: ...
