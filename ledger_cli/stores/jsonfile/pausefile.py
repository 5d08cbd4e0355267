"""The JSON store's pause (docs/design.md §8.3): `paused.json` in the store directory.

Present while paused (`{"since", "actor", "reason"}`), absent while running.
Written atomically (temporary file, fsync, rename, directory fsync) under the
store lock; a `--next` claim reads it inside the batch that holds that lock
for its scan and claim, so a claim either saw the pause or landed before it.
"""

from __future__ import annotations

import json
import os

from ledger_cli.engine.instant import Instant
from ledger_cli.stores.jsonfile.keyfiles import unreadable
from ledger_cli.stores.jsonfile.locking import LockedDirectory, store_method

PAUSE_NAME = "paused.json"


class PauseMethods(LockedDirectory):
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
            Instant.parse(state[0])  # engine/pause.py reads it as a time
        except (ValueError, TypeError, KeyError):
            raise unreadable(shown, "pause", "`ledger resume` removes it") from None
        return state

    @store_method
    def write_pause(self, state: tuple[str, str, str] | None) -> None:
        self._check_open()
        data = None
        if state is not None:
            since, actor, reason = state
            data = json.dumps({"since": since, "actor": actor, "reason": reason}).encode()
        with self._locked(create=True) as root_fd:
            assert root_fd is not None
            self._write_root_file(root_fd, PAUSE_NAME, data)
