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
