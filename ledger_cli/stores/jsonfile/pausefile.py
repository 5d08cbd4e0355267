"""The JSON store's pause (docs/design.md §8.3): `paused.json` in the store directory.

Present while paused (`{"since", "actor", "reason"}`), absent while running.
Written atomically (temporary file, fsync, rename, directory fsync) under the
store lock; a `--next` claim reads it inside the batch that holds that lock
for its scan and claim, so a claim either saw the pause or landed before it.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ledger_cli.stores.jsonfile import fsutil
from ledger_cli.stores.jsonfile.fsutil import fail
from ledger_cli.stores.jsonfile.locking import store_method

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

PAUSE_NAME = "paused.json"


class PauseMethods:
    _root: str

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def _locked(self, *, create: bool) -> AbstractContextManager[int | None]: ...

        def _read_root_file(self, name: str, shown: str) -> bytes | None: ...

    @store_method
    def read_pause(self, for_claim: bool = False) -> tuple[str, str, str] | None:
        self._check_open()
        shown = os.path.join(self._root, PAUSE_NAME)
        data = self._read_root_file(PAUSE_NAME, shown)
        if data is None:
            return None
        try:
            obj = json.loads(data)
            state = (str(obj["since"]), str(obj["actor"]), str(obj["reason"]))
        except (ValueError, TypeError, KeyError):
            raise fail(shown, "is not a pause file this release can read") from None
        return state

    @store_method
    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        self._check_open()
        shown = os.path.join(self._root, PAUSE_NAME)
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            if state is None:
                fsutil.unlink_quiet(root_fd, PAUSE_NAME)
            else:
                since, actor, reason = state
                data = json.dumps({"since": since, "actor": actor, "reason": reason}).encode()
                fsutil.replace_file(root_fd, PAUSE_NAME, data, shown, sync=True)
            fsutil.fsync_fd(root_fd, self._root)
