"""The JSON store's schedules (docs/design.md §8.1, §8.2; engine/schedule.py): one small
file per key that has a not-before or a priority, `schedule/<digest>.json`
(`{"key", "not_before", "priority"}`), written atomically under the store lock
in the same lock hold as the admission that set it. A key without a file has
priority 0 and is due at its CreatedAt. Derived from nothing else: the
schedule is the only copy of an admission's `--not-before`/`--priority`.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.records import key_digest

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from ledger_cli.engine.record import TaskState

SCHEDULE_DIR = "schedule"


def _decode(data: bytes, shown: str) -> tuple[str, tuple[Instant, int]]:
    try:
        obj = json.loads(data)
        nb = str(obj["not_before"])
        priority = obj["priority"]
        if type(priority) is not int:
            raise TypeError("priority")
        return str(obj["key"]), (Instant.parse(nb) if nb else Instant.ZERO, priority)
    except (ValueError, TypeError, KeyError):
        raise fail(shown, "is not a schedule file this release can read") from None


class ScheduleMethods:
    _root: str

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def _locked(self, *, create: bool) -> AbstractContextManager[int | None]: ...

        def load(self, key: str) -> TaskState | None: ...

    def _schedule_dir(self, create: bool) -> int | None:
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return None
        try:
            shown = os.path.join(self._root, SCHEDULE_DIR)
            return fsutil.open_subdir(root_fd, SCHEDULE_DIR, shown, create=create)
        finally:
            os.close(root_fd)

    @store_method
    def schedule_of(self, key: str) -> tuple[Instant, int] | None:
        self._check_open()
        digest = key_digest(key)
        if digest is None:
            return None
        fd = self._schedule_dir(create=False)
        if fd is None:
            return None
        name = digest + ".json"
        shown = os.path.join(self._root, SCHEDULE_DIR, name)
        try:
            data = fsutil.read_file(fd, name, shown)
        finally:
            os.close(fd)
        if data is None:
            return None
        stored_key, value = _decode(data, shown)
        return value if stored_key == key else None

    @store_method
    def set_schedule(self, key: str, value: tuple[Instant, int] | None) -> None:
        self._check_open()
        digest = key_digest(key)
        if digest is None:
            if value is None:
                return
            from ledger_cli.errors import StoreError

            raise StoreError("ledger: store: this key cannot be stored")
        name = digest + ".json"
        shown = os.path.join(self._root, SCHEDULE_DIR, name)
        with self._locked(create=True):
            fd = self._schedule_dir(create=value is not None)
            if fd is None:
                return
            try:
                if value is None:
                    if not fsutil.unlink_quiet(fd, name):
                        return  # it had none: nothing changes
                    fsutil.fsync_fd(fd, shown)
                    os.close(fd)
                    fd = None
                    self._index_schedule(key, None)
                    return
                nb, priority = value
                text = "" if nb.is_zero() else str(nb)
                body = {"key": key, "not_before": text, "priority": priority}
                data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
                fsutil.replace_file(fd, name, data, shown, sync=True)
                fsutil.fsync_fd(fd, shown)
            finally:
                if fd is not None:
                    os.close(fd)
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
        rfd = None
        try:
            rfd = readyindex.open_dir(self._root, root_fd, create=False)
            chunks = None if rfd is None else readyindex.load_chunks(self._root, root_fd, rfd)
            if chunks is not None:  # else not built: its rebuild reads the schedules
                chunks.add([entry], sync=True)
        finally:
            fsutil.close_all([rfd, root_fd])

    @store_method
    def schedules(self) -> dict[str, tuple[Instant, int]]:
        self._check_open()
        fd = self._schedule_dir(create=False)
        if fd is None:
            return {}
        found: dict[str, tuple[Instant, int]] = {}
        try:
            for name in sorted(os.listdir(fd)):
                if not name.endswith(".json") or name.startswith("."):
                    continue
                shown = os.path.join(self._root, SCHEDULE_DIR, name)
                data = fsutil.read_file(fd, name, shown)
                if data is not None:
                    key, value = _decode(data, shown)
                    found[key] = value
        finally:
            os.close(fd)
        return found

    @store_method
    def has_schedules(self) -> bool:
        self._check_open()
        fd = self._schedule_dir(create=False)
        if fd is None:
            return False
        try:
            with os.scandir(fd) as entries:
                return any(e.name.endswith(".json") and not e.name.startswith(".") for e in entries)
        finally:
            os.close(fd)


def reader(root: str) -> Callable[[str], tuple[Instant, int] | None]:
    """A key's schedule as the ready index orders it (readyindex.entry_of), read
    from the store at `root`: nothing at all on a store that keeps no schedule
    (no schedule/ directory), else one small file per key asked, never a listing
    (its cost does not grow with the scheduled keys). For one operation only:
    it caches what it read."""
    if not os.path.isdir(os.path.join(root, SCHEDULE_DIR)):
        return lambda key: None
    cache: dict[str, tuple[Instant, int] | None] = {}

    def read(key: str) -> tuple[Instant, int] | None:
        if key in cache:
            return cache[key]
        digest = key_digest(key)
        value = None
        if digest is not None:
            path = os.path.join(root, SCHEDULE_DIR, digest + ".json")
            try:
                with open(path, "rb") as fh:
                    data: bytes | None = fh.read()
            except FileNotFoundError:
                data = None
            except OSError as exc:
                raise fail(path, "cannot read", exc) from None
            if data is not None:
                stored, got = _decode(data, path)
                value = got if stored == key else None
        cache[key] = value
        return value

    return read
