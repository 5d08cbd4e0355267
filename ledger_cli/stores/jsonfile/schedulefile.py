"""The JSON store's schedules (docs/design.md §8.1, §8.2; engine/schedule.py): one small
file per key that has a not-before or a priority, `schedule/<digest>.json`
(`{"key", "not_before", "priority"}`), written with the batch of the admission
that set it: its commit carries it, and writes it before the records
(keyfiles.py). A key without a file has
priority 0 and is due at its CreatedAt. Derived from nothing else: the
schedule is the only copy of an admission's `--not-before`/`--priority`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.jsonfile.keyfiles import KeyFiles
from ledger_cli.stores.jsonfile.locking import LockedDirectory, store_method

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    from ledger_cli.engine.record import TaskState

    _V = TypeVar("_V")

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

        def _stage_side(
            self, files: KeyFiles[_V], key: str, body: dict[str, object] | None
        ) -> None: ...

        def _staged_side(self, files: KeyFiles[_V], key: str) -> tuple[_V | None] | None: ...

        def _with_staged(self, files: KeyFiles[_V]) -> dict[str, _V]: ...

    @store_method
    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        self._check_open()
        kind = files(self._root)
        staged = self._staged_side(kind, key)
        return kind.read(key) if staged is None else staged[0]

    @store_method
    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        """Keep `value` as `key`'s schedule (None: none), with the open batch
        (else as a batch of one). Its commit writes the file before the
        records and adds the ready-index entry `key`'s record has under it,
        if a candidate (apply.py); the entry of its old schedule is stale,
        dropped when met."""
        self._check_open()
        body: dict[str, object] | None = None
        if value is not None:
            nb, priority = value
            body = {"key": key, "not_before": "" if nb.is_zero() else str(nb), "priority": priority}
        self._stage_side(files(self._root), key, body)

    @store_method
    def schedules(self) -> dict[str, tuple[Instant, int]]:
        self._check_open()
        return self._with_staged(files(self._root))

    @store_method
    def has_schedules(self) -> bool:
        self._check_open()
        batch = self._batch
        if batch is not None and batch.mine() and batch.sides:
            return bool(self.schedules())
        return files(self._root).any()


def reader(root: str) -> Callable[[str], tuple[Instant, int] | None]:
    """A key's schedule as the ready index orders it (readyindex.entry_of), for
    one operation (KeyFiles.reader): nothing read on a store that keeps no
    schedule, else one small file per key asked, never a listing."""
    return files(root).reader(None)
