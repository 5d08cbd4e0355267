"""The Ready rule of `claim --next` and `run --next` (docs/design.md §4.3; beyond the Go package).

A record is ready when it is pending, or claimed with an expired lease; no key
in its transitive needs is failed or blocked; and every need it names is
completed (a need not yet admitted means "not yet"). Oldest first by
CreatedAt, then key. The engine's own `claim KEY` keeps Go's rule (needs block
only on failure); this ordering is what users of `after`/`afterok`
dependencies expect from `--next`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.queuefilter import Filter
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.schedule import Schedule

    Loader = Callable[[str], "TaskState | None"]

_CLAIMABLE = ("pending", "claimed")


def claimable(rec: TaskState, now: Instant) -> bool:
    """Pending, or claimed with a lease that has run out (LeaseUntil <= now)."""
    if rec.status == "pending":
        return True
    return rec.status == "claimed" and rec.lease_until <= now


def needs_satisfied(rec: TaskState, load: Loader) -> bool:
    """Every direct need completed, and nothing failed or blocked in the closure."""
    if not rec.needs:
        return True  # no closure to walk: engine/dependencies.py stays unimported
    for need in rec.needs:
        dep = load(need)
        if dep is None or dep.status != "completed":
            return False
    from ledger_cli.engine.dependencies import nearest_blocking

    return nearest_blocking(load, rec.needs) is None


def is_ready(rec: TaskState, load: Loader, now: Instant) -> bool:
    return claimable(rec, now) and needs_satisfied(rec, load)


def order_key(rec: TaskState) -> tuple[int, bytes]:
    return (rec.created_at.unix_ns, rec.key.encode("utf-8", "surrogatepass"))


def _memo(load: Loader) -> Loader:
    """`load`, each key read once."""
    cache: dict[str, TaskState | None] = {}

    def cached(key: str) -> TaskState | None:
        if key not in cache:
            cache[key] = load(key)
        return cache[key]

    return cached


def ready_records(
    candidates: Iterable[TaskState],
    load: Loader,
    now: Instant,
    schedules: dict[str, Schedule] | None = None,
) -> list[TaskState]:
    """The ready records among `candidates`, in the Ready order: oldest first
    (CreatedAt, then key); with `schedules` (docs/design.md §8.2), priority first, then the
    due instant, then key, and a task not yet due is not ready."""
    cached = _memo(load)
    if not schedules:
        pool = sorted((r for r in candidates if claimable(r, now)), key=order_key)
    else:
        from ledger_cli.engine import schedule

        get = schedules.get
        pool = sorted(
            (r for r in candidates if claimable(r, now) and schedule.is_due(r, get(r.key), now)),
            key=lambda r: schedule.order_key(r, get(r.key)),
        )
    return [r for r in pool if needs_satisfied(r, cached)]


def _scheduled(store: object) -> dict[str, Schedule] | None:
    """The store's schedules when it keeps any and its ready index does not
    order by them itself (`orders_schedules`); else None (the index's order
    is the Ready order)."""
    from ledger_cli.engine import schedule

    if getattr(store, "orders_schedules", False) or not schedule.any_kept(store):  # type: ignore[arg-type]
        return None
    return schedule.every(store)  # type: ignore[arg-type]


def candidates(store: object) -> list[TaskState]:
    """Pending and claimed records: the store's `by_status` scan when it has one."""
    by_status: Callable[[Iterable[str]], list[TaskState]] | None = getattr(store, "by_status", None)
    if by_status is not None:
        return list(by_status(_CLAIMABLE))
    rng: Callable[[], Iterable[TaskState]] = store.range  # type: ignore[attr-defined]
    return [r for r in rng() if r.status in _CLAIMABLE]


def ready_iter(
    store: object, load: Loader, now: Instant, queues: Filter | None = None
) -> Iterator[TaskState]:
    """The ready records, oldest first, found lazily.

    Through the store's ready index (`ready_candidates(now)`: live records whose
    direct needs are completed, in order; a store may leave out claimed ones
    whose lease runs past `now`) when it has one, so the first ready
    record costs the same however long the backlog; else by a scan.
    `queues`: a store with `filters_queues` reads only the tasks of the
    queues it admits; any other store yields every queue's (the caller
    filters).
    """
    cached = _memo(load)
    source: Callable[..., Iterable[TaskState]] | None = getattr(store, "ready_candidates", None)
    schedules = _scheduled(store)
    if source is None or schedules is not None:
        yield from ready_records(candidates(store), load, now, schedules)
        return
    recs = (
        source(now, queues=queues)
        if queues is not None and getattr(store, "filters_queues", False)
        else source(now)
    )
    for rec in recs:
        if is_ready(rec, cached, now):
            yield rec


def nameable(key: str) -> bool:
    """Whether `claim --next` may hand out `key`: it prints the key so that a
    worker can name it back, so the key must be valid UTF-8. (A key the Go
    service wrote with invalid bytes is read with lone surrogates; `doctor`
    reports it, and `claim KEY` takes its exact bytes.)"""
    if key.isascii():
        return True
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def count_ready(store: object, load: Loader, now: Instant) -> tuple[int, TaskState | None, int]:
    """How many records `claim --next` would hand out at `now`, the oldest of
    them (the smallest CreatedAt; of equals, the first in the Ready order: not
    the first in the Ready order, which a newer task of a higher priority
    takes, so `stats`' oldest age never drops when a task arrives), and how
    many more are ready by the rule but have a key that is not valid UTF-8,
    which `claim --next` never hands out (`ledger stats`).

    A SQL store counts its pending candidates that name no needs in the
    database (`ready_split(now)`: each one is ready, whatever else the store
    holds, and its count and first leave such keys out; `ready_apart()`
    counts them) and hands over the other candidates (claimed, or naming needs),
    judged here by the whole rule; a backlog of 100,000 independent tasks is
    then one count, not 100,000 records read. That split is used only while
    no task has a schedule, when the Ready order is CreatedAt's, so its first
    is the oldest. Else the ready records are walked (`ready_iter`).
    """
    split: Callable[[Instant], tuple[int, TaskState | None, Iterable[TaskState]]] | None
    split = getattr(store, "ready_split", None)
    count = apart = 0
    oldest: TaskState | None = None
    from ledger_cli.engine import schedule

    if split is None or schedule.any_kept(store):  # type: ignore[arg-type]
        others: Iterable[TaskState] = ready_iter(store, load, now)
        judge = False
    else:
        count, oldest, others = split(now)
        free_apart: Callable[[], int] | None = getattr(store, "ready_apart", None)
        apart = free_apart() if free_apart is not None else 0
        judge = True
    cached = _memo(load)
    for rec in others:
        if judge and not is_ready(rec, cached, now):
            continue
        if not nameable(rec.key):
            apart += 1
            continue
        if oldest is None or _older(rec, oldest):
            oldest = rec
        count += 1
    return count, oldest, apart


def _older(rec: TaskState, than: TaskState) -> bool:
    """Whether `rec` was created before `than` (of equals, the earlier in the
    Ready order: order_key)."""
    a, b = rec.created_at.unix_ns, than.created_at.unix_ns
    return a < b or (a == b and order_key(rec) < order_key(than))


def ready_at_clock(
    store: object, load: Loader, queues_at: Callable[[Instant], Filter | None] | None = None
) -> tuple[Instant, Iterator[TaskState]] | None:
    """`(now, ready_iter(store, load, now))` with `now` the store's clock, read
    inside the open batch by its first ready query (`ready_at_clock`, which the
    store must have: `Session.unit_now`); None when no candidate came (then no
    clock was read, and nothing is ready). `queues_at(now)`: the queue filter
    for that clock, which a store with `filters_queues` applies itself."""
    if _scheduled(store) is not None:  # the index's order is not the Ready order
        store_now: Callable[[], Instant] = store.now  # type: ignore[attr-defined]
        now = store_now()
        filt = None if queues_at is None else queues_at(now)
        return now, ready_iter(store, load, now, filt)
    source: Callable[..., tuple[Instant, Iterable[TaskState]] | None]
    source = store.ready_at_clock  # type: ignore[attr-defined]
    filtering = queues_at is not None and getattr(store, "filters_queues", False)
    got = source(queues_at) if filtering else source()
    if got is None:
        return None
    now, recs = got
    cached = _memo(load)
    return now, (rec for rec in recs if is_ready(rec, cached, now))


def live_lease_held(store: object, now: Instant) -> bool:
    """Whether some record is claimed with a lease that runs past `now` (a
    held lease: its holder's outcome may yet make more records ready, which
    `run --next --drain` waits for). Reads only the claimed records where the
    store can name them (the JSON store's tally, a SQL store's status index);
    else every record."""
    claimed: Callable[[], Iterable[TaskState]] | None = getattr(store, "claimed_records", None)
    if claimed is not None:
        # The JSON store: its tally's count first (one small file), and only
        # when some record is claimed its noted records.
        counts: Callable[[], dict[str, int] | None] | None = getattr(store, "status_counts", None)
        counted = counts() if counts is not None else None
        if counted is not None and counted.get("claimed", 0) == 0:
            return False
    else:
        by_status: Callable[[Iterable[str]], Iterable[TaskState]] | None = getattr(
            store, "by_status", None
        )
        if by_status is not None:
            return any(r.lease_until > now for r in by_status(("claimed",)))
        rng: Callable[[], Iterable[TaskState]] = store.range  # type: ignore[attr-defined]
        return any(r.status == "claimed" and r.lease_until > now for r in rng())
    return any(r.status == "claimed" and r.lease_until > now for r in claimed())
