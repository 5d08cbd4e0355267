"""The JSON store's methods that only `ledger doctor` calls: the fence floor
it raises before a drop (docs/design.md §3.2), wal.log's applied frames,
damaged attempt files, a record file's bytes decoded as the store reads them,
the live/ index's check and repair (liveview.py).
Their work is imported on their call (doctor's path only)."""

from __future__ import annotations

import functools
import os

from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import fsutil, layout
from ledger_cli.stores.jsonfile.commit import CommitMethods
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.records import decode_record_file


class RepairMethods(CommitMethods):
    @property
    @store_method
    def fence_floor(self) -> int:
        """The store-wide fence floor kept in the metadata file (0 for a new store)."""
        root_fd = fsutil.open_root(self._root)
        if root_fd is None:
            return 0
        try:
            meta = self._read_meta(root_fd)
        finally:
            os.close(root_fd)
        return 0 if meta is None else int(meta["fence_floor"])

    @store_method
    def raise_fence_floor(self, fence: int) -> tuple[int, int]:
        """Raise the fence floor to `fence` when it is lower, durably (the
        metadata file replaced and synced, under the lock), before `doctor
        --fix --drop-damaged` drops a record: every key inserted after it (an
        admit of the dropped key again) starts at the floor, so no claim hands
        out a fence the dropped record's holder may still hold (docs/design.md
        §3.2). The floor before and after; (0, 0) for a store not created yet."""
        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return 0, 0
            meta = self._read_meta(root_fd)
            assert meta is not None  # the lock is only taken on a store
            before = int(meta["fence_floor"])
            if fence > before:
                meta["fence_floor"] = fence
                self._write_root_file(root_fd, layout.META_NAME, layout.meta_bytes(meta))
            self._floor = max(before, fence)
            return before, self._floor

    @store_method
    def check_log(self, repair: bool = False) -> str | None:
        """`ledger doctor`: wal.log's frames this boot applied, read whole:
        walcheck.check_applied (`repair`: --fix). What was done, or None."""
        from ledger_cli.stores.jsonfile import walcheck  # doctor's path only

        if not walcheck.looks_damaged(self._root):  # the lock only to confirm (§5.4)
            return None
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return None
            how = self._replay(root_fd)
            done = walcheck.check_applied(self._root, root_fd, how, "applied" if repair else "no")
        return None if done is None else done[0]

    @store_method
    def damaged_attempts(self) -> list[tuple[str, str]]:
        """`ledger doctor`: every attempt file that does not read, (its key's
        digest, the error's line) each (attemptdamage.py)."""
        from ledger_cli.stores.jsonfile import attemptdamage  # doctor's path only

        self._check_open()
        return attemptdamage.damaged(self._root)

    @store_method
    def drop_damaged_attempts(self, digest: str) -> list[tuple[str, str]]:
        """`ledger doctor --fix --drop-damaged`: the attempt files of the key
        of `digest` that do not read, moved into damaged/; (where each was,
        where it went). In the caller's batch, when it has one (doctor's, which
        writes the `ledger.dropped` history lines in the same lock hold)."""
        from ledger_cli.stores.jsonfile import attemptdamage  # doctor's path only

        self._check_open()
        with self._locked(create=False) as root_fd:
            if root_fd is None:
                return []
            # Moving a file is a write around wal.log: checkpointed first (wal.py).
            before = functools.partial(self.checkpoint, root_fd)
            return attemptdamage.move_aside(self._root, root_fd, digest, before)

    @store_method
    def check_record_file(self, data: bytes, shown: str, digest: str) -> TaskState:
        """Decode a record file's bytes as the store reads them (`ledger doctor`):
        checksum, wire record, validation, and the file name (`digest`) of its key."""
        return decode_record_file(data, shown, checksummed=self._checksummed, digest=digest)

    @store_method
    def check_live_index(self) -> list[str]:
        """`ledger doctor`: the pending and claimed records live/ misses (liveview.py)."""
        from ledger_cli.stores.jsonfile import liveview  # doctor's path only

        self._check_open()
        return liveview.check(self)

    @store_method
    def rebuild_live_index(self) -> None:
        """`ledger doctor --fix`: put back the live/ entries it misses (liveview.py)."""
        from ledger_cli.stores.jsonfile import liveview  # doctor's path only

        self._check_open()
        liveview.rebuild(self)
