"""Revoked leases keep their queue slots (docs/design.md §8.7; engine/queues.py
counts them).

A write that takes a live lease from its holder (a cancel, a rebase, a block
of a claimed task) leaves a runner that learns of the loss only at its next
renewal and may run its command until then, never past the lease's end. So
the lease keeps holding a slot of its queue until that end: the store keeps
it as a *revoked lease* (key, fence, queue, LeaseUntil) beside the queues,
in the revoking write's own unit, and `queues.held_by_queue` counts it while
its LeaseUntil is after now.

Apart from engine/queues.py, which reads the queues through the Ready rule:
`Core` calls this module, and `Core` is under the Ready rule's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.schedule import lease_end

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

DEFAULT = "default"
"""engine/queues.py's DEFAULT: a key the store keeps no queue for is in it."""


def keep_slot(store: Store, key: str, prev: TaskState, now: Instant) -> None:
    """After a write that took `key`'s lease from the holder of `prev`, in the
    same unit: a lease still live at `now` keeps its slot in `key`'s queue (the
    queue before the write: call this before a rebase moves the key) until it
    would have run out. One entry per lease (`key` and `prev`'s fence): the
    un-block of a task blocked while claimed names the lease its block kept.
    A store without `keep_revoked` frees the slot at once."""
    keep: Callable[[str, int, str, Instant, Instant], None] | None = getattr(
        store, "keep_revoked", None
    )
    end = lease_end(prev, now)
    if keep is None or end is None or not prev.owner:
        return
    queue_of: Callable[[str], str | None] | None = getattr(store, "queue_of", None)
    queue = queue_of(key) if queue_of is not None else None
    keep(key, prev.fence, queue if queue is not None else DEFAULT, end, now)
