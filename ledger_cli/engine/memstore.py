"""MemStore: the in-memory Store, optionally bounded (docs/design.md §3.1).

The Go package's own store (its store.go), and `Ledger()`'s default when no
store is given, so it lives in the engine. `ledger_cli.engine.memstore` names
it among the backends (the `memory:` URL).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import CLAIMED, TaskState, byte_order
from ledger_cli.errors import InvalidMaxEntriesError

if TYPE_CHECKING:
    from ledger_cli.engine.history import HistoryEntry

T = TypeVar("T")

EVICT_SCAN_BUDGET = 8
"""Rotations one eviction round may spend on exempt heads before giving up."""


@dataclasses.dataclass(frozen=True, slots=True)
class MemStoreOptions:
    """`max_entries` 0 means unbounded; `now` is the clock eviction reads (default: wall clock)."""

    max_entries: int = 0
    now: Callable[[], Instant | datetime] | None = None


class MemStore:
    """A mutex-guarded dict of records.

    With a positive `max_entries`, every successful write evicts records in
    insertion order until the count is back at the cap, skipping the key being
    written and claimed records whose lease is live; a deletion raises the
    store-wide fence floor, so a re-admitted key never reuses a fence.
    """

    def __init__(self, options: MemStoreOptions | None = None) -> None:
        opts = options or MemStoreOptions()
        if opts.max_entries < 0:
            raise InvalidMaxEntriesError(
                "ledger: MemStoreOptions.MaxEntries must not be negative, "
                f"got {opts.max_entries}: {InvalidMaxEntriesError.message}"
            )
        self._max = opts.max_entries
        self._now = opts.now or Instant.now
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskState] = {}
        self._queue: deque[str] = deque()
        self._floor = 0
        self._history: list[HistoryEntry] = []
        self._pruned: set[str] = set()
        self._pause: tuple[str, str, str] | None = None  # docs/design.md §8.3 (engine/pause.py)
        # docs/design.md §8.1 (engine/schedule.py)
        self._schedules: dict[str, tuple[Instant, int]] = {}
        # docs/design.md §8.7: keys outside default (engine/queues.py)
        self._queues: dict[str, str] = {}
        self._limits: dict[str, int] = {}
        self._revoked: dict[tuple[str, int], tuple[str, Instant]] = {}
        self._needed_by: dict[str, set[str]] = {}  # need -> keys naming it (`dependents`)

    def forgets(self) -> bool:
        """Whether records can disappear (a bounded store evicts). `retry`'s
        repairs (engine/reopen.py) then keep every block Go would keep."""
        return self._max > 0

    @property
    def fence_floor(self) -> int:
        return self._floor

    def load(self, key: str) -> TaskState | None:
        with self._lock:
            return self._tasks.get(key)

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        new = as_stored(new)
        with self._lock:
            cur = self._tasks.get(key)
            if cur is None:
                if old is not None:
                    return False
                if new.fence < self._floor or new.rev != 0:
                    new = new.replace(fence=max(new.fence, self._floor), rev=0)
                self._tasks[key] = new
                self._queue.append(key)
                self._link(key, None, new.needs)
            else:
                if old is None or old.cas_tuple() != cur.cas_tuple():
                    return False
                self._tasks[key] = new.replace(rev=cur.rev + 1)
                if new.needs != cur.needs:
                    self._link(key, cur.needs, new.needs)
            if self._max > 0:
                self._evict(key)
            return True

    def _clock(self) -> Instant:
        """The eviction clock's instant. Not `Instant.coerce`, which refuses an
        offset of seconds as no store can write it: this time is compared, never
        written, and the write it follows is already done."""
        now = self._now()
        return Instant.from_datetime(now) if isinstance(now, datetime) else now

    def _evict(self, written: str) -> None:
        rotations = 0
        while len(self._tasks) > self._max:
            head = self._queue.popleft()
            rec = self._tasks[head]
            if head == written or (rec.status == CLAIMED and rec.lease_until > self._clock()):
                self._queue.append(head)
                rotations += 1
                if rotations >= EVICT_SCAN_BUDGET:
                    return
                continue
            if rec.fence > self._floor:
                self._floor = rec.fence
            del self._tasks[head]
            self._link(head, rec.needs, None)
            self._pruned.discard(head)
            self._schedules.pop(head, None)  # an evicted key's schedule goes with it
            self._queues.pop(head, None)

    def _link(self, key: str, old: Iterable[str] | None, new: Iterable[str] | None) -> None:
        """Move `key` in the reverse needs map from its `old` needs to its `new` ones."""
        for need in old or ():
            keys = self._needed_by.get(need)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._needed_by[need]
        for need in new or ():
            self._needed_by.setdefault(need, set()).add(key)

    def dependents(self, keys: Iterable[str]) -> list[TaskState]:
        """The records naming any of `keys` in their needs (engine
        `dependents_walk`): a reverse map kept with every write."""
        with self._lock:
            found = {k for need in keys for k in self._needed_by.get(need, ())}
            return [self._tasks[k] for k in sorted(found, key=byte_order)]

    def range(self) -> Iterator[TaskState]:
        with self._lock:
            view = sorted(self._tasks.items(), key=lambda item: byte_order(item[0]))
        return iter([rec for _, rec in view])

    # -- prune (docs/design.md §6.4; engine/prune.py) ---------------------------------------

    def prune_records(self, pairs: Sequence[tuple[TaskState, TaskState]]) -> int:
        """Store each pruned record (a compare-and-swap), mark it, drop its history."""
        done: set[str] = set()
        for old, new in pairs:
            if self.compare_and_swap(old.key, old, new):
                done.add(old.key)
        with self._lock:
            self._pruned |= done & self._tasks.keys()
            self._history = [e for e in self._history if e.key not in done]
        return len(done)

    def restore_pruned(self, records: Sequence[TaskState]) -> str | None:
        """Insert each pruned record where its key has none (engine/prune.py `restore`):
        the first taken key (nothing written), else None."""
        with self._lock:
            for rec in records:
                if rec.key in self._tasks:
                    return rec.key
        for rec in records:
            self.compare_and_swap(rec.key, None, rec)
        with self._lock:
            self._pruned |= {rec.key for rec in records} & self._tasks.keys()
        return None

    def visible_range(self) -> Iterator[TaskState]:
        with self._lock:
            pruned = set(self._pruned)
        return iter([r for r in self.range() if r.key not in pruned])

    def pruned_range(self) -> Iterator[TaskState]:
        with self._lock:
            pruned = set(self._pruned)
        return iter([r for r in self.range() if r.key in pruned])

    def is_pruned(self, key: str) -> bool:
        with self._lock:
            return key in self._pruned

    def count_pruned(self) -> int:
        with self._lock:
            return len(self._pruned)

    def __len__(self) -> int:
        with self._lock:
            return len(self._tasks)

    def append_history(self, entries: Sequence[HistoryEntry]) -> None:
        with self._lock:
            self._history.extend(entries)

    def read_history(self, key: str | None = None) -> Iterator[HistoryEntry]:
        with self._lock:
            entries = list(self._history)
        return iter([e for e in entries if key is None or e.key == key])

    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        with self._lock:
            return self._schedules.get(key)

    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        with self._lock:
            _set_or_drop(self._schedules, key, value)

    def schedules(self) -> dict[str, tuple[Instant, int]]:
        with self._lock:
            return dict(self._schedules)

    def has_schedules(self) -> bool:
        with self._lock:
            return bool(self._schedules)

    def queue_of(self, key: str) -> str | None:
        with self._lock:
            return self._queues.get(key)

    def set_queue(self, key: str, queue: str | None) -> None:
        with self._lock:
            _set_or_drop(self._queues, key, queue)

    def queues(self) -> dict[str, str]:
        with self._lock:
            return dict(self._queues)

    def limits(self) -> dict[str, int]:
        with self._lock:
            return dict(self._limits)

    def set_limit(self, queue: str, n: int | None) -> None:
        with self._lock:
            _set_or_drop(self._limits, queue, n)

    def keep_revoked(self, key: str, fence: int, queue: str, until: Instant, now: Instant) -> None:
        """A revoked lease's slot (engine/revoked.py); those ended by `now` go."""
        with self._lock:
            self._revoked = {k: v for k, v in self._revoked.items() if v[1] > now}
            self._revoked.setdefault((key, fence), (queue, until))

    def revoked_leases(self) -> list[tuple[str, str, Instant]]:
        with self._lock:
            return [(k, q, until) for (k, _), (q, until) in self._revoked.items()]

    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        with self._lock:
            return self._pause

    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        with self._lock:
            self._pause = state

    def batch(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def close(self) -> None:
        pass

    def __enter__(self) -> MemStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_stored(rec: TaskState) -> TaskState:
    """`rec` as a durable store writes it and reads it back: EncodeError (exit
    8) where the JSON store's encoding fails (a Task Go cannot marshal: NaN,
    infinity, a set, bytes, a dict with keys that are not str; a time past
    the year 9999, such as the end of a lease of `timedelta.max`), and its
    Task as the stores read it back (an integer beyond 64 bits a float64, a
    tuple a list). The JSON store's own two functions (`record_to_json`,
    `record_from_canonical`), so that a program tried on `memory:` fails
    where a real store fails (docs/design.md §3.1)."""
    from ledger_cli.engine.fastwire import record_from_canonical
    from ledger_cli.engine.wire.encode import record_to_json

    text = record_to_json(rec)
    if rec.task is None:
        return rec
    return rec.replace(task=record_from_canonical(text).task)


def _set_or_drop(mapping: dict[str, T], key: str, value: T | None) -> None:
    """`mapping[key] = value`, or no entry for `key` when `value` is None."""
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value
