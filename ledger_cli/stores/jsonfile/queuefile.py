"""The JSON store's queues and limits (engine/queues.py).

`queue/<digest>.json` (`{"key", "queue"}`, keyfiles.py) for each key outside
the `default` queue, written with the batch of the admission that set it (its
commit carries it: keyfiles.py), and `limits.json` (`{QUEUE: N}`) in the store
directory, written atomically and durably under the store lock by the `ledger
limit` that set it. A key without a file is in `default`: a record the Go
service wrote is in `default` and its bytes never change.

`revoked.json` (`[[KEY, FENCE, QUEUE, LEASE_UNTIL], …]`) holds the leases a
cancel, rebase or block took from a holder that may still run: each holds a
slot of its queue until its LeaseUntil (engine/revoked.py). It is
written in the lock hold of the revoking write, before that write's records
(a crash between leaves a slot held a little longer, never one freed early),
and each write of it drops the entries ended by then. Absent: none.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import queueread
from ledger_cli.stores.jsonfile.keyfiles import unreadable
from ledger_cli.stores.jsonfile.locking import store_method
from ledger_cli.stores.jsonfile.reading import RecordReader

if TYPE_CHECKING:
    from typing import TypeVar

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.stores.jsonfile.keyfiles import KeyFiles

    _V = TypeVar("_V")

LIMITS_NAME = "limits.json"
REVOKED_NAME = "revoked.json"
_REVOKED_REMEDY = "remove it (the leases it names then free their slots at once)"


class QueueMethods(RecordReader):
    if TYPE_CHECKING:

        def load(self, key: str) -> TaskState | None: ...

        def _stage_side(
            self, files: KeyFiles[_V], key: str, body: dict[str, object] | None
        ) -> None: ...

        def _staged_side(self, files: KeyFiles[_V], key: str) -> tuple[_V | None] | None: ...

        def _with_staged(self, files: KeyFiles[_V]) -> dict[str, _V]: ...

    @store_method
    def queue_of(self, key: str) -> str | None:
        self._check_open()
        files = queueread.files(self._root)
        staged = self._staged_side(files, key)
        return files.read(key) if staged is None else staged[0]

    @store_method
    def set_queue(self, key: str, queue: str | None) -> None:
        """Keep `queue` as `key`'s (None: `default`), with the open batch (else
        as a batch of one). Its commit writes the file before the records and
        adds the ready-index entry of `key`'s record, if a candidate, to the
        new queue's partition (apply.py); the entry left in the old one is
        stale, dropped when met."""
        self._check_open()
        body: dict[str, object] | None = None
        if queue is not None:
            body = {"key": key, "queue": queue}
        self._stage_side(queueread.files(self._root), key, body)

    @store_method
    def queues(self) -> dict[str, str]:
        self._check_open()
        return self._with_staged(queueread.files(self._root))

    @store_method
    def limits(self) -> dict[str, int]:
        self._check_open()
        shown = os.path.join(self._root, LIMITS_NAME)
        data = self._read_root_file(LIMITS_NAME, shown)
        if data is None:
            return {}
        try:
            obj = json.loads(data)
            if type(obj) is not dict or any(
                type(k) is not str or type(v) is not int or v < 1 for k, v in obj.items()
            ):
                raise TypeError("limits")
        except (ValueError, TypeError):
            remedy = "repair it, or remove it and set the limits again with `ledger limit`"
            raise unreadable(shown, "limits", remedy) from None
        return dict(obj)

    @store_method
    def set_limit(self, queue: str, n: int | None) -> None:
        self._check_open()
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            found = self.limits()
            if n is None:
                if found.pop(queue, None) is None:
                    return
            else:
                found[queue] = n
            data = None
            if found:
                data = json.dumps(found, ensure_ascii=False, sort_keys=True).encode(
                    "utf-8", "surrogatepass"
                )
            self._write_root_file(root_fd, LIMITS_NAME, data)

    @store_method
    def revoked_leases(self) -> list[tuple[str, str, Instant]]:
        """(key, queue, LeaseUntil) of each revoked lease kept (ended ones too,
        until the next revocation drops them)."""
        self._check_open()
        return [(key, queue, until) for key, _, queue, until in self._revoked()]

    def _revoked(self) -> list[tuple[str, int, str, Instant]]:
        from ledger_cli.engine.instant import Instant  # revoked leases are rare

        shown = os.path.join(self._root, REVOKED_NAME)
        data = self._read_root_file(REVOKED_NAME, shown)
        if data is None:
            return []
        out: list[tuple[str, int, str, Instant]] = []
        try:
            rows = json.loads(data)
            if type(rows) is not list:
                raise TypeError("revoked")
            for key, fence, queue, until in rows:
                if not (type(key) is type(queue) is type(until) is str and type(fence) is int):
                    raise TypeError("revoked")
                out.append((key, fence, queue, Instant.parse(until)))
        except (ValueError, TypeError):
            raise unreadable(shown, "revoked leases", _REVOKED_REMEDY) from None
        return out

    @store_method
    def keep_revoked(self, key: str, fence: int, queue: str, until: Instant, now: Instant) -> None:
        """Keep the revoked lease (`key` at `fence`) until `until`, once; drop
        those ended by `now`."""
        self._check_open()
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            rows = [r for r in self._revoked() if r[3] > now]
            if not any(r[0] == key and r[1] == fence for r in rows):
                rows.append((key, fence, queue, until))
            # ASCII with escapes: a key's lone surrogates (another writer's bytes) read back
            data = json.dumps([[k, f, q, str(u)] for k, f, q, u in rows]).encode()
            self._write_root_file(root_fd, REVOKED_NAME, data if rows else None)
