"""What a store already holds of a snapshot: `ledger restore` is idempotent per
record (docs/design.md §2.9).

A restore cut short (killed, its connection dropped) leaves the snapshot's
first records in the store, each block whole. Running the same restore again
finishes it: a key that already holds exactly the snapshot's record is counted
as already restored and left alone; a key that holds anything else is a
conflict (exit 8, nothing written).

"Exactly the snapshot's record" is what `ledger snapshot` would write for the
key, but for what the store sets itself on an insert: the wire record (§2.10)
but its `Rev` (every store assigns 0) and its `Fence`, which an insert raises
(`as_inserted`) to the store's fence floor (the JSON store and MemStore raise
a new key's fence to it, §3.1, §3.2) and to the highest fence the key's own
history shows (`history_bounds`: a record restored over a lost one never
hands out again a fence the lost one granted); its extensions, the schedule
and the queue (§8.1, §8.7); and whether it is pruned (§6.4). Any write to a
restored record (a claim, a rebase, a retry) changes its UpdatedAt, so a
record changed since it was restored never passes for it. The fence is
compared before it is raised: an earlier run inserted it raised to what the
floor and the history showed then (both only rise), so the store's may be
anything from the snapshot's to today's raised one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine import prune, queues, schedule
from ledger_cli.engine.wire.encode import FIELD_NAMES, record_to_json

if TYPE_CHECKING:
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.schedule import Schedule
    from ledger_cli.engine.store import Store


class Held:
    """Compares a store's records with a snapshot's (`differs`)."""

    def __init__(
        self,
        store: Store,
        schedules: dict[str, Schedule],
        queued: dict[str, str],
        marked: frozenset[str],
        bounds: dict[str, int] | None = None,
    ) -> None:
        self._store = store
        self._schedules = schedules
        self._queued = queued
        self._marked = marked
        self._bounds = bounds or {}
        self._floor: int | None = None

    def floor(self) -> int:
        """The store's fence floor (0 where it keeps none), read once."""
        if self._floor is None:
            value = getattr(self._store, "fence_floor", 0)
            self._floor = value if isinstance(value, int) else 0
        return self._floor

    def as_inserted(self, rec: TaskState) -> TaskState:
        """`rec` as the store keeps it once inserted: Rev 0, its fence at least
        the floor and the highest fence its key's history shows."""
        fence = max(rec.fence, self.floor(), self._bounds.get(rec.key, 0))
        return rec.replace(rev=0, fence=fence)

    def differs(self, held: TaskState, rec: TaskState) -> list[str]:
        """What the store's record of the key, `held`, has other than the
        snapshot's `rec` (its pruned form when marked): the wire names of the
        fields, `NotBefore/Priority`, `Queue` or `Pruned`; empty when the key
        already holds the snapshot's record."""
        held, rec = held.replace(rev=0), rec.replace(rev=0)
        # Compared before the raise (see above): a fence an insert may have set passes.
        fence = held.fence if rec.fence <= held.fence <= self.as_inserted(rec).fence else rec.fence
        if record_to_json(held) != record_to_json(rec.replace(fence=fence)):
            return _fields(held, rec)  # what differs from the snapshot's own
        key, store = rec.key, self._store
        found = []
        if schedule.of(store, key) != self._schedules.get(key):
            found.append("NotBefore/Priority")
        if queues.of(store, key) != self._queued.get(key, queues.DEFAULT):
            found.append("Queue")
        if held.status in prune.PRUNABLE and prune.is_pruned(store, key) != (key in self._marked):
            found.append("Pruned")
        return found


def _fields(a: TaskState, b: TaskState) -> list[str]:
    """The wire names of the fields whose encodings differ."""
    import json

    left, right = json.loads(record_to_json(a)), json.loads(record_to_json(b))
    named = [name for name in FIELD_NAMES if left.get(name) != right.get(name)]
    return named or ["Task"]  # only a payload's bytes can differ between equal values
