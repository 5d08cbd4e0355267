"""`ledger doctor --fix --drop-damaged`: the JSON store's fence floor, raised
before a record is dropped (docs/design.md §3.2).

A dropped key may be admitted again, and its record then starts at the
store's fence floor: were the floor lower than a fence the dropped record
granted, a claim would hand that fence out again, and the worker still
holding it (its lease live when the file went) would renew and complete
over the new holder's lease. So before anything is dropped the floor is
raised, durably, to the highest fence the store still shows anywhere: the
`"Fence"` a damaged record file still reads (its checksum failed, so only
together with the others), every history line (a claim's line carries the
fence it granted, committed with the record itself, so the history bounds
a lost record exactly unless its lines were lost too), and every record
read. The dropped key's own lines would do when its history is whole; the
whole store's highest costs nothing more (doctor has read it all) and also
covers what no line of the key shows: a store written through the library
or by the Go service (no history), a history lost or cut, writes of a
damaged wal.log. What none of them shows (a record and its lines both
lost, at a fence above every other) no bound can know; the floor only ever
rises.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ledger_cli.engine.leases import UINT64_MAX

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ledger_cli.cli.commands.doctor.findings import Findings
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.record import TaskState

_FENCE = rb'"Fence"\s*:\s*([0-9]{1,20})'
"""The wire record's Fence member. It comes before Task (the only member
holding raw JSON), so the first match is the record's own."""


def readable_fence(data: bytes) -> int:
    """The fence a damaged record file still shows (0 when none reads)."""
    found = re.search(_FENCE, data)
    if found is None:
        return 0
    fence = int(found.group(1))
    return fence if fence <= UINT64_MAX else 0


def drop_floor(
    records: Iterable[TaskState], history: Iterable[HistoryEntry], damaged: Iterable[bytes]
) -> int:
    """The fence floor a drop raises the store's to: the highest fence of the
    records read, the history's lines and the damaged files' bytes."""
    return max(
        (
            *(rec.fence for rec in records),
            *(entry.fence for entry in history),
            *(readable_fence(data) for data in damaged),
        ),
        default=0,
    )


class FenceFloor:
    """What a drop raises the floor to, raised once, under the store lock of
    the drop itself (`raise_now`), before anything is dropped."""

    __slots__ = ("_found", "_raised", "_store", "bound")

    def __init__(self, store: object, bound: int, found: Findings) -> None:
        self._store = store
        self.bound = bound
        self._found = found
        self._raised = False

    def raise_now(self) -> None:
        """Raise the store's floor to the bound (a `fixed:` line when it
        rose). Inside the drop's batch: the floor is durable before the drop."""
        raise_fence_floor = getattr(self._store, "raise_fence_floor", None)
        if self._raised or raise_fence_floor is None:
            return
        before, after = raise_fence_floor(self.bound)
        self._raised = True
        if after > before:
            self._found.fixed.append(
                f"raised the fence floor from {before} to {after}: a dropped key admitted "
                "again never hands out a fence its dropped record may have granted"
            )
