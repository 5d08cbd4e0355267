"""Prune (docs/design.md §6.4): retention that keeps idempotency forever.

Selects the records in the given statuses (completed and failed by default)
last updated at least `older_than` before `now` — except a failed record that
some blocked record still names in BlockedBy, or that an unfinished record
needs — and replaces each by its
pruned form: Key, Status, Sequence, Owner, Fence, CreatedBy/At and
UpdatedBy/At kept, Task and Needs null (LeaseUntil zero, BlockedBy empty).
The store then marks the key pruned (so listings leave it out) and drops its
history lines. A pruned record is still the terminal record it was: `admit`
says duplicate, fence operations are refused, a task that needs it sees its
status.

A store prunes through its optional `prune_records(pairs)` (the pairs of
current and pruned records; each a compare-and-swap, so a record that changed
meanwhile is left alone; CHUNK records per lock hold or transaction);
`visible_range()` and `pruned_range()` serve the listings. Every store of this package has them.

`restore` puts pruned records back (a snapshot's `"Pruned": true` entries,
engine/wireext.py) through the store's `restore_pruned(records)`: each an
insert-if-absent straight into the pruned form, never live in between, in
the caller's batch where the store has one (docs/design.md §2.10).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.engine.store import Store
from ledger_cli.errors import StoreError, UnknownStatusError

if TYPE_CHECKING:
    from ledger_cli.engine.blocks import Blocks

PRUNABLE = ("completed", "failed")
CHUNK = 500
"""Records a store prunes per lock hold or transaction (docs/design.md §5.4: short lock holds)."""


def pruned_form(rec: TaskState) -> TaskState:
    return rec.replace(task=None, needs=None, lease_until=Instant.ZERO, blocked_by="")


def visible(store: Store) -> Iterator[TaskState]:
    """Every record but the pruned ones, sorted by key."""
    view: Callable[[], Iterable[TaskState]] | None = getattr(store, "visible_range", None)
    return iter(view() if view is not None else store.range())


def pruned(store: Store) -> Iterator[TaskState]:
    """The pruned records only, sorted by key."""
    view: Callable[[], Iterable[TaskState]] | None = getattr(store, "pruned_range", None)
    return iter(view() if view is not None else ())


def is_pruned(store: Store, key: str) -> bool:
    check: Callable[[str], bool] | None = getattr(store, "is_pruned", None)
    return check is not None and check(key)


def keys(store: Store) -> frozenset[str]:
    """The pruned keys (a snapshot marks their records, engine/wireext.py)."""
    return frozenset(rec.key for rec in pruned(store))


def restore(store: Store, records: Sequence[TaskState]) -> str | None:
    """Insert each record in its pruned form where its key has none; the first key
    that has one (the store then wrote none of `records`), else None."""
    if not records:
        return None
    put: Callable[[Sequence[TaskState]], str | None] | None = getattr(store, "restore_pruned", None)
    if put is None:
        raise StoreError(f"ledger: restore: {type(store).__name__} cannot hold pruned records")
    return put([pruned_form(rec) for rec in records])


def count_pruned(store: Store) -> int:
    count: Callable[[], int] | None = getattr(store, "count_pruned", None)
    return count() if count is not None else 0


def select(
    store: Store, older_than: timedelta, statuses: Sequence[str], now: Instant
) -> list[TaskState]:
    """The records a prune would take, in key order."""
    wanted = frozenset(statuses or PRUNABLE)
    for status in wanted:
        if status not in PRUNABLE:
            raise UnknownStatusError(
                f"ledger: prune takes --status completed or failed, not {status!r}"
            )
    cutoff = Instant.from_unix_ns(now.unix_ns - _ns(older_than), 0)
    # Read without the lock where the store can (the JSON store's lock would be
    # held for a whole scan, docs/design.md §5.4): each record chosen is compared again
    # under the lock before it is pruned, and one changed meanwhile is left.
    scan: Callable[[], Iterable[TaskState]] | None = getattr(store, "scan_visible", None)
    if scan is not None:
        records = sorted(scan(), key=lambda r: byte_order(r.key))
    else:
        records = list(visible(store))
    # A failure stays while something blocked names it, and while something
    # unfinished needs it: a failure commits before the blocks it causes
    # (docs/design.md §5.4), and pruned in between it would leave them
    # blocked by a failure no `retry` can reopen.
    kept = {r.blocked_by for r in records if r.status == "blocked"}
    kept.update(n for r in records if r.status not in PRUNABLE for n in r.needs or ())
    return [
        r
        for r in records
        if r.status in wanted
        and r.updated_at.unix_ns <= cutoff.unix_ns
        and not (r.status == "failed" and r.key in kept)
    ]


def prune(
    store: Store,
    older_than: timedelta,
    statuses: Sequence[str],
    now: Instant,
    dry_run: bool = False,
    blocks: Blocks | None = None,
) -> int:
    """Prune what `select` finds (nothing with `dry_run`); the number of records.

    With a `blocks` driver (engine/blocks.py) the driver sizes and paces the
    calls of `prune_records`, each committing its own records."""
    chosen = select(store, older_than, statuses, now)
    if dry_run or not chosen:
        return len(chosen)
    prune_records: Callable[[Sequence[tuple[TaskState, TaskState]]], int] | None = getattr(
        store, "prune_records", None
    )
    if prune_records is None:
        raise StoreError(f"ledger: prune: {type(store).__name__} cannot prune records")
    pairs = [(r, pruned_form(r)) for r in chosen]
    if blocks is None:
        return prune_records(pairs)
    finish: Callable[[], None] | None = getattr(store, "drop_deferred_history", None)
    if finish is None:
        return blocks.runs(pairs, prune_records)
    # The JSON store rewrites its history file to drop lines: once, not per call.
    many: Callable[..., int] = prune_records
    done = blocks.runs(pairs, lambda part: many(part, defer_history=True))
    finish()
    return done


def _ns(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
