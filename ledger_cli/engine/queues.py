"""Queues and limits held by leases (docs/design.md §8.7): extensions kept beside the Go
record, never in it.

A store keeps a *queue name* per key that is not in the default queue (JSON
store: one small file per key, `queue/<digest>.json`; SQL stores: the side
table `ledger_queue`) and a *limit* per queue that has one (JSON store:
`limits.json`; SQL: `ledger_limit`). A key without a queue entry is in
`default`, so a record the Go service wrote is in `default` and its bytes do
not change.

A *held slot* is a live lease: a claimed task of the queue whose LeaseUntil is
after now, or a *revoked* lease, one that a cancel, a rebase or a block took
from its holder while it was live (engine/revoked.py), until the LeaseUntil
it had: its runner may run its command until its next renewal, and never
past that end. A lease that runs out frees its slot with no one's help. The check
and the claim run in one store unit (the JSON store's lock hold; an SQL
transaction), so no two claimers can both take the last slot.

A store offers `queue_of(key)`, `set_queue(key, name | None)`, `queues()`
(every key not in `default`), `limits()` and `set_limit(queue, n | None)`;
one without them keeps every task in `default`, with no limit. The revoked
leases: `keep_revoked(key, fence, queue, until, now)` (in the revoking
write's unit; it drops those ended by `now`) and `revoked_leases()` (key,
queue, until each; one that has ended may still be listed); a store without
them frees a revoked lease's slot at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.queuefilter import Filter
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.store import Store

from ledger_cli.errors import LedgerError

DEFAULT = "default"
MAX_NAME_BYTES = 64


def of(store: Store, key: str) -> str:
    get: Callable[[str], str | None] | None = getattr(store, "queue_of", None)
    got = get(key) if get is not None else None
    return got if got is not None else DEFAULT


def put(store: Store, key: str, name: str) -> None:
    """Keep `name` as `key`'s queue (`default` clears the side entry)."""
    from ledger_cli.engine.store import set_side_entry

    set_side_entry(store, "set_queue", "queues", key, None if name == DEFAULT else name)


def every(store: Store) -> dict[str, str]:
    """Every key that is not in `default`, with its queue."""
    get: Callable[[], dict[str, str]] | None = getattr(store, "queues", None)
    return get() if get is not None else {}


def limits(store: Store) -> dict[str, int]:
    get: Callable[[], dict[str, int]] | None = getattr(store, "limits", None)
    return get() if get is not None else {}


def set_limit(store: Store, queue: str, n: int | None) -> None:
    set_: Callable[[str, int | None], None] | None = getattr(store, "set_limit", None)
    if set_ is None:
        from ledger_cli.errors import StoreError

        raise StoreError(f"ledger: this store ({type(store).__name__}) keeps no limits")
    set_(queue, n)


def is_live(rec: TaskState, now: Instant) -> bool:
    """A held slot: claimed, with a lease that has not run out."""
    return rec.status == "claimed" and rec.lease_until > now


def claimed_records(store: Store) -> list[TaskState]:
    """The claimed records, by the cheapest read the store has (the JSON
    store's tally, an SQL status index), never every pending record."""
    tally: Callable[[], list[TaskState]] | None = getattr(store, "claimed_records", None)
    if tally is not None:
        return tally()
    by_status: Callable[[Iterable[str]], list[TaskState]] | None = getattr(store, "by_status", None)
    if by_status is not None:
        return by_status(("claimed",))
    from ledger_cli.engine.ready import candidates

    return [r for r in candidates(store) if r.status == "claimed"]


def held_by_queue(store: Store, now: Instant, skip: str | None = None) -> dict[str, int]:
    """The held slots of every queue: the live leases (`skip`: a key whose
    current lease is not to count, a takeover's own) and the revoked leases
    not yet ended (engine/revoked.py). In one query on an SQL store
    (`held_leases`: one snapshot); else the claimed records, then the
    revoked leases (in that order: a revocation landing between the two
    reads is counted twice, never missed)."""
    counts: dict[str, int] = {}
    leases: Callable[[], list[tuple[str, str, Instant, bool]]] | None = getattr(
        store, "held_leases", None
    )
    if leases is not None:
        for key, q, until, revoked in leases():
            if until > now and (revoked or key != skip):
                counts[q] = counts.get(q, 0) + 1
        return counts
    for rec in claimed_records(store):
        if rec.key != skip and is_live(rec, now):
            q = of(store, rec.key)
            counts[q] = counts.get(q, 0) + 1
    kept: Callable[[], list[tuple[str, str, Instant]]] | None = getattr(
        store, "revoked_leases", None
    )
    for _key, q, until in kept() if kept is not None else ():
        if until > now:  # its runner may still run: the slot stays held
            counts[q] = counts.get(q, 0) + 1
    return counts


class Slots:
    """The limits and held slots one claim unit sees (read once, kept up to
    date as the unit claims)."""

    def __init__(self, store: Store, now: Instant, skip: str | None = None) -> None:
        self.store = store
        self.now = now
        self.skip = skip
        self.limits = limits(store)
        self.held = held_by_queue(store, now, skip) if self.limits else {}

    def lock_slot(self, queue: str, key: str | None = None) -> bool:
        """Whether `queue` has a free slot for a claim made now, in this unit.

        A store whose claimers run concurrently (PostgreSQL: `lock_limit`)
        locks the queue's limit row (after `key`'s row, for a claim by key)
        and counts the held slots again: a claimer that took the last slot
        meanwhile has committed by the time the lock is granted. The JSON
        store and SQLite hold their lock for the whole unit: the counts read
        at its start stand."""
        if queue not in self.limits:
            return True
        lock: Callable[[str, str | None], int | None] | None = getattr(
            self.store, "lock_limit", None
        )
        if lock is not None:
            n = lock(queue, key)
            if n is None:  # cleared meanwhile
                del self.limits[queue]
                return True
            self.limits[queue] = n
            self.held[queue] = held_by_queue(self.store, self.now, self.skip).get(queue, 0)
        return not self.full(queue)

    def full(self, queue: str) -> bool:
        n = self.limits.get(queue)
        return n is not None and self.held.get(queue, 0) >= n

    def describe(self, queue: str) -> str:
        n, held = self.limits[queue], self.held.get(queue, 0)
        return f"queue {queue} is at its limit ({held} of {n} held)"

    def full_queues(self) -> frozenset[str]:
        return frozenset(q for q in self.limits if self.full(q))

    def took(self, queue: str) -> None:
        self.held[queue] = self.held.get(queue, 0) + 1


class QueueChoice:
    """One claim unit's queue filter, made at the unit's clock (`__call__`):
    the `wanted` queues less those at their limit then. `slots` keeps what it
    read for the claim that follows in the unit."""

    def __init__(self, store: Store, wanted: frozenset[str] | None) -> None:
        self.store = store
        self.wanted = wanted
        self.slots: Slots | None = None

    def __call__(self, now: Instant) -> Filter | None:
        self.slots = Slots(self.store, now)
        full = self.slots.full_queues()
        if self.wanted is None and not full:
            return None
        from ledger_cli.engine.queuefilter import Filter  # a filter is rare: --queue, a full queue

        return Filter(self.wanted, full)


class QueueFullError(LedgerError):
    """`claim KEY` / `takeover KEY` of a task whose queue is at its limit (exit 4)."""

    code = "queue_full"
    exit_code = 4
    message = "ledger: the queue is at its limit"


def check_slot(store: Store, key: str, now: Instant) -> None:
    """Raise QueueFullError unless `key`'s queue has a free slot (its own lease,
    live or stale, is not counted: a takeover reuses the slot it held)."""
    if not limits(store):
        return
    queue = of(store, key)
    slots = Slots(store, now, skip=key)
    if not slots.lock_slot(queue, key):
        raise QueueFullError(f"ledger: {slots.describe(queue)}")


def check_stale_slot(store: Store, key: str, now: Instant) -> None:
    """For a renew or takeover of `key`: a lease that has run out freed its
    slot, so it takes one again only while its queue has one free
    (QueueFullError, exit 4); a live lease keeps its own."""
    if not limits(store):
        return
    rec = store.load(key)
    if rec is not None and rec.status == "claimed" and rec.lease_until <= now:
        check_slot(store, key, now)


def figures(
    store: Store, now: Instant, counts: dict[str, int], ready_count: int
) -> dict[str, dict[str, int | None]]:
    """`stats --json`'s `queues`: per queue, its pending and claimed tasks, its
    ready ones (as claim --next sees them), its limit and its held slots.
    Without queues in use, the store's own totals are `default`'s (no extra
    read); else the keys outside `default` are read, and the ready ones.
    Listed: `default`, every queue with a limit, and every queue that holds a
    record the store keeps, of any status (its figures 0 once it drains:
    a dashboard's series goes on rather than vanish); the pass over the keys
    outside `default` names them at no extra read."""
    lim = limits(store)
    side = every(store)
    held = held_by_queue(store, now)
    out: dict[str, dict[str, int | None]] = {}

    def row(q: str) -> dict[str, int | None]:
        if q not in out:
            out[q] = {"pending": 0, "claimed": 0, "ready": 0, "limit": lim.get(q), "held": 0}
        return out[q]

    d = row(DEFAULT)
    d["pending"], d["claimed"], d["ready"] = counts["pending"], counts["claimed"], ready_count
    if side:
        from ledger_cli.engine import ready

        for key, q in side.items():
            rec = store.load(key)
            if rec is not None:
                row(q)
            if rec is not None and rec.status in ("pending", "claimed"):
                row(q)[rec.status] = (row(q)[rec.status] or 0) + 1
                d[rec.status] = (d[rec.status] or 0) - 1
        for rec in ready.ready_iter(store, store.load, now):
            q = side.get(rec.key, DEFAULT)
            if q != DEFAULT and ready.nameable(rec.key):
                row(q)["ready"] = (row(q)["ready"] or 0) + 1
                d["ready"] = (d["ready"] or 0) - 1
    for q in lim:
        row(q)
    for q, n in held.items():
        row(q)["held"] = n
    return {q: out[q] for q in sorted(out)}
