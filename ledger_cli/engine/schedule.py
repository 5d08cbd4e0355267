"""When, and in what order (docs/design.md §8.1, §8.2): not-before and priority.

These are extensions kept beside the Go record, never in it: a store keeps a
*schedule* `(not_before, priority)` per key that has one (MemStore: a dict;
JSON store: a small file per key; SQL stores: the side table
`ledger_schedule`), which the Go service never sees. A key without one has
priority 0 and is due at its CreatedAt, so a record the Go service wrote is
ordered exactly as before.

The Ready order of `claim --next`: highest priority first; within a priority
the earliest *due* instant (the later of CreatedAt and not-before); then key.
With no schedules in a store that is exactly the older order (CreatedAt,
then key). A task that is not due yet is not ready; a claim by key ignores
all of this, as in Go.

A write that takes a task from the holder of a live lease (a rebase, a
cancel, an un-block) lets the command line keep the task from `--next` until
that lease ends (`wait_out`, through `Core.dispossessed`): the dispossessed
runner may still be running until then, and never past it.

A store offers `schedule_of(key)`, `set_schedule(key, value | None)`,
`schedules()` (every key's) and `has_schedules()`; one without them keeps no
schedule, and every task on it is due at once with priority 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant

if TYPE_CHECKING:
    from collections.abc import Callable

    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store


Schedule = tuple[Instant, int]
"""(not_before, priority); not_before is Instant.ZERO when only a priority was given."""


def normal(not_before: Instant | None, priority: int) -> Schedule | None:
    """The schedule to keep for an admission's options; None for the defaults."""
    nb = not_before if not_before is not None else Instant.ZERO
    if nb.is_zero() and priority == 0:
        return None
    return (nb, priority)


def lease_end(prev: TaskState | None, now: Instant) -> Instant | None:
    """The end of the lease `prev` (a record a write is replacing) holds, when
    it is still live at `now`; else None. A finished record holds none (its
    holder ended it); a blocked one may (a claimed task keeps its owner and
    lease when a failure below it blocks it)."""
    if prev is None or prev.lease_until <= now or prev.status in ("completed", "failed"):
        return None
    return prev.lease_until


def wait_out(value: Schedule | None, prev: TaskState | None, now: Instant) -> Schedule | None:
    """`value` (the schedule a write keeps), made not due before the live
    lease of `prev` (the record the write replaced) ends, unless it is already
    due later; its priority is kept. The one rule for a rebase, a cancel and
    an un-block (docs/design.md §2.2, §6.2, §6.3, §8.1)."""
    end = lease_end(prev, now)
    if end is None or (value is not None and value[0] >= end):
        return value
    return (end, value[1] if value is not None else 0)


def hold(store: Store, key: str, prev: TaskState, now: Instant) -> None:
    """`wait_out` on `key`'s kept schedule, in the batch of the write that replaced `prev`."""
    kept = of(store, key)
    value = wait_out(kept, prev, now)
    if value != kept:
        put(store, key, value)


def of(store: Store, key: str) -> Schedule | None:
    get: Callable[[str], Schedule | None] | None = getattr(store, "schedule_of", None)
    return get(key) if get is not None else None


def put(store: Store, key: str, value: Schedule | None) -> None:
    """Keep `value` as `key`'s schedule (None clears it)."""
    from ledger_cli.engine.store import set_side_entry

    set_side_entry(store, "set_schedule", "schedules", key, value)


def every(store: Store) -> dict[str, Schedule]:
    get: Callable[[], dict[str, Schedule]] | None = getattr(store, "schedules", None)
    return get() if get is not None else {}


def any_kept(store: Store) -> bool:
    has: Callable[[], bool] | None = getattr(store, "has_schedules", None)
    return has() if has is not None else False


def due(rec: TaskState, value: Schedule | None) -> Instant:
    """The later of CreatedAt and not-before."""
    if value is None or value[0] <= rec.created_at:
        return rec.created_at
    return value[0]


def order_key(rec: TaskState, value: Schedule | None) -> tuple[int, int, bytes]:
    """The Ready order: priority (highest first), due instant, key (bytes)."""
    priority = value[1] if value is not None else 0
    return (-priority, due(rec, value).unix_ns, rec.key.encode("utf-8", "surrogatepass"))


def is_due(rec: TaskState, value: Schedule | None, now: Instant) -> bool:
    return value is None or value[0] <= now
