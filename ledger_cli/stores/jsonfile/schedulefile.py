"""The JSON store's schedules (docs/design.md §8.1, §8.2; engine/schedule.py): one small
file per key that has a not-before or a priority, `schedule/<digest>.json`
(`{"key", "not_before", "priority"}`), written atomically under the store lock
in the same lock hold as the admission that set it. A key without a file has
priority 0 and is due at its CreatedAt. Derived from nothing else: the
schedule is the only copy of an admission's `--not-before`/`--priority`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.keyfiles import KeyFiles
from ledger_cli.stores.jsonfile.locking import LockedDirectory, store_method

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.record import TaskState

SCHEDULE_DIR = "schedule"


REMEDY = "repair or remove it (without it the task has no not-before and priority 0)"


def _decode(obj: dict[str, object]) -> tuple[str, tuple[Instant, int]]:
    nb = str(obj["not_before"])
    priority = obj["priority"]
    if type(priority) is not int:
        raise TypeError("priority")
    return obj["key"], (Instant.parse(nb) if nb else Instant.ZERO, priority)  # type: ignore[return-value]


def files(root: str) -> KeyFiles[tuple[Instant, int]]:
    return KeyFiles(root, SCHEDULE_DIR, _decode, REMEDY)


class ScheduleMethods(LockedDirectory):
    if TYPE_CHECKING:

        def load(self, key: str) -> TaskState | None: ...

    @store_method
    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        self._check_open()
        return files(self._root).read(key)

    @store_method
    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        self._check_open()
        body: dict[str, object] | None = None
        if value is not None:
            nb, priority = value
            body = {"key": key, "not_before": "" if nb.is_zero() else str(nb), "priority": priority}
        with self._locked(create=True):
            if files(self._root).write(key, body):  # a removal of no file changes nothing
                self._index_schedule(key, value)

    def _index_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        """Add the ready-index entry the key has under its new schedule when it is
        a candidate (under the lock, before its record's next write: the index is
        a superset; the entry of its old schedule is stale, dropped when met)."""
        from ledger_cli.stores.jsonfile import readyindex

        rec = self.load(key)
        if rec is None or not readyindex.is_candidate(rec, self.load):
            return
        entry = readyindex.entry_of(rec, value)
        if entry is None:
            return
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return
        try:
            with readyindex.opened(self._root, root_fd) as chunks:
                if chunks is not None:  # else not built: its rebuild reads the schedules
                    chunks.add([entry], sync=True)
        finally:
            fsutil.close_all([root_fd])

    @store_method
    def schedules(self) -> dict[str, tuple[Instant, int]]:
        self._check_open()
        return files(self._root).all()

    @store_method
    def has_schedules(self) -> bool:
        self._check_open()
        return files(self._root).any()


def reader(root: str) -> Callable[[str], tuple[Instant, int] | None]:
    """A key's schedule as the ready index orders it (readyindex.entry_of), for
    one operation (KeyFiles.reader): nothing read on a store that keeps no
    schedule, else one small file per key asked, never a listing."""
    return files(root).reader(None)
