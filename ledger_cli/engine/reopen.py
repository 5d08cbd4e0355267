"""Blocking and un-blocking: `block_one` (Go's blockOne, docs/design.md §2.7)
and the walk that follows a reopened record (docs/design.md §6.2).

They call each other (a block's confirming read may settle; a settle may
block again), so both sides of the race below live in this one module.

An extension beyond the Go package. In Go a failed or blocked record never
changes again, so a block, once written, stays true. `retry` breaks that: it
turns a failed record back into a pending one, and every record blocked
because of it must be re-examined, including records that other processes
block on it *while* the retry runs. The invariant kept: once every operation
has returned, no record is blocked while nothing failed is in its transitive
needs (an *orphaned block*).

The argument is Go's own Admit/recheck argument (docs/design.md §2.7), run in
the mirror direction. Two parties race:

- a *blocker* writes X blocked by B (W1) after reading B failed or blocked;
- a *reopener* writes B not-blocking (W2: a retry, or an un-block).

Each does a write and then a read: the blocker re-reads B after W1
(`confirm_block`), and the reopener scans the store after W2 (`settle`, which
keeps scanning until a scan finds nothing to change, so its last scan comes
after its last write). Every store linearizes single operations (a CAS, a
load, a range), so either the blocker's re-read sees W2 (and it repairs X
itself, with `settle`) or the reopener's scan sees W1 (and repairs X). The
JSON and SQLite stores hold an exclusive write lock for a whole `batch()`, so
a batch is one step in this order.

A PostgreSQL batch is a READ COMMITTED transaction that excludes nobody: with
both sides in open transactions at once, neither read sees the other's
uncommitted write, and the order above breaks. There every operation that may
write a block, a failure or an un-block (admit with a need not completed, a
failed completion, a claim refused by a failed ancestor, cancel, retry, and every
`block_one`, `reexamine` and `settle`, which the repairs run) first takes one
transaction-scoped lock (`serial.blocking_writes`: `PostgresStore.lock_blocks`,
`pg_advisory_xact_lock` on a key of the schema) and holds it to its commit;
outside a batch the operation is made a transaction of its own for that. Two
such transactions therefore run one after the other, and the later one's
reads (before and after its write) see the earlier one committed: W1 and W2
of the race are ordered with their own reads, as in a JSON or SQLite batch.
`engine/serial.py` says how deadlocks with row locks are avoided.
`tests/engine/test_retry_concurrency.py` stages the race that was open before (an
un-block by `doctor --fix`'s repair and a claim's block in two open
transactions) and runs admits-with-needs in batches, claims, failures,
cancels and retries in batches in 4 processes for 30 rounds: no orphan.

What "still failed or blocked" means needs care in a dependency cycle:
blocked records there can vouch for each other with no failure left (two
retries of a failed cycle, each reading the other still failed). So a block
whose blocker is blocked is confirmed by a walk that must find a real failure
when it comes back round to the record itself (`failure_behind`); outside a
cycle the blocker's own block is confirmed the same way, by induction.

The same care runs the other way for un-blocking: after writing X pending,
X's needs are walked again, and a failure that landed meanwhile blocks X
again (Go's recheckNeeds), so an un-block does not open a new escape window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger_cli.engine import events
from ledger_cli.engine.core import Core
from ledger_cli.engine.dependents import dependents_walk, needs_walk
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import (
    BLOCKED,
    CLAIMED,
    FAILED,
    PENDING,
    TaskState,
    byte_order,
    is_terminal,
)
from ledger_cli.engine.serial import blocking_writes

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ledger_cli.engine.blocks import Blocks

_BLOCKING = frozenset({FAILED, BLOCKED})


def still_blocking(core: Core, key: str) -> bool:
    """Whether `key` is failed or blocked now. A missing key counts as blocking:
    a bounded MemStore evicts terminal records, and Go keeps such a block."""
    rec = core.store.load(key)
    return rec is None or rec.status in _BLOCKING


def block_one(core: Core, actor: str, now: Instant, key: str, cur: TaskState, blocker: str) -> bool:
    """Move `cur` to blocked by `blocker`; give up silently if it went terminal.

    Returns whether it wrote. Extension (docs/design.md §6.2): after the write, the
    blocker is read again (`confirm_block`), so that a concurrent
    `retry` cannot leave this block orphaned; without retries that read
    always finds the blocker still failed or blocked and changes nothing.
    The write and that read run under `serial.blocking_writes`.
    """
    return blocking_writes(core, _block_one, core, actor, now, key, cur, blocker)


def _block_one(
    core: Core, actor: str, now: Instant, key: str, cur: TaskState, blocker: str
) -> bool:
    while True:
        nxt = cur.replace(status=BLOCKED, blocked_by=blocker, updated_by=actor, updated_at=now)
        if core.swap(key, cur, nxt):
            if cur.status == CLAIMED:  # its holder loses the lease at its next renewal
                core.slot_kept(key, cur, now)
            core.emit(events.BLOCKED, key, f"key {key} blocked by {blocker}")
            confirm_block(core, actor, now, key, blocker)
            return True
        fresh = core.store.load(key)
        if fresh is None or is_terminal(fresh.status):
            return False
        cur = fresh


def confirm_block(core: Core, actor: str, now: Instant, key: str, blocker: str) -> None:
    """After writing `key` blocked by `blocker`: the read that follows the write.

    - The blocker failed (or gone: a bounded MemStore evicts, and Go keeps
      such a block): the block stands. One load; a store no retry touched
      always ends here or below, and nothing changes (Go's behaviour exactly).
    - The blocker blocked: it stands while a failure is reachable through the
      needs. In a dependency cycle blocked records can otherwise vouch for
      each other (two retries of a failed cycle, each reading the other still
      failed), so there the walk must find a real failure; without a cycle
      the blocker's own block is vouched for the same way, by induction.
    - Anything else (the blocker was reopened meanwhile): settle `key`.
    """
    rec = core.store.load(blocker)
    if rec is None or rec.status == FAILED:
        return
    if rec.status == BLOCKED:
        if forgets(core.store):  # Go keeps blocks whose failure was evicted
            return
        failure, cyclic = failure_behind(core.store.load, key)
        if failure is not None or not cyclic:
            return
    settle(core, actor, now, [key], note="")


def forgets(store: object) -> bool:
    """A store whose records can disappear (a bounded MemStore)."""
    hook = getattr(store, "forgets", None)
    return bool(hook()) if callable(hook) else False


def failure_behind(load: Callable[[str], TaskState | None], key: str) -> tuple[str | None, bool]:
    """What vouches for `key`'s block: the nearest failed key in its transitive
    needs, or a blocked one whose BlockedBy is gone (a bounded MemStore evicted
    the failure; Go keeps such blocks); and whether the walk came back to `key`
    (a dependency cycle)."""
    start = load(key)
    if start is None:
        return None, False
    cyclic = False
    for k, rec in needs_walk(load, start.needs):
        cyclic = cyclic or k == key
        if rec.status == FAILED:
            return k, cyclic
        if rec.status == BLOCKED and load(rec.blocked_by) is None:
            return rec.blocked_by, cyclic
    return None, cyclic


def needs_first(found: dict[str, TaskState]) -> list[TaskState]:
    """`found`'s records ordered so that a record's needs come before it
    (cycles: byte order). Linear in records and needs."""
    # Kahn's order inside the found set: needs first; a cycle yields its smallest key.
    waiting = {k: {n for n in (r.needs or ()) if n in found and n != k} for k, r in found.items()}
    dependents: dict[str, list[str]] = {}
    for k, needs in waiting.items():
        for n in needs:
            dependents.setdefault(n, []).append(k)
    import heapq  # a walk's alone: not on every command's start-up

    heap = [(byte_order(k), k) for k, w in waiting.items() if not w]
    heapq.heapify(heap)
    done: set[str] = set()
    ordered: list[TaskState] = []
    while len(done) < len(found):
        if not heap:
            key = min((k for k in found if k not in done), key=byte_order)
        else:
            key = heapq.heappop(heap)[1]
            if key in done:
                continue
        done.add(key)
        ordered.append(found[key])
        for other in dependents.get(key, ()):
            needs = waiting[other]
            needs.discard(key)
            if not needs and other not in done:
                heapq.heappush(heap, (byte_order(other), other))
    return ordered


def nearest_failed(
    load: Callable[[str], TaskState | None], needs: Iterable[str] | None
) -> str | None:
    """Breadth-first over the transitive needs, walking through every status:
    the nearest failed key, or None. A blocked record is justified exactly
    when this finds one (a blocked need is walked through, not trusted: it
    may itself be a block that is being undone)."""
    for key, rec in needs_walk(load, needs):
        if rec.status == FAILED:
            return key
    return None


def reexamine(core: Core, actor: str, now: Instant, cur: TaskState, note: str) -> tuple[bool, bool]:
    """Re-examine one blocked record.

    With a failed record in its transitive needs it stays blocked (its
    BlockedBy is kept while that is still failed or blocked, else it names
    the nearest failure). With none, it becomes pending (Owner "", LeaseUntil
    zero; Fence kept, so the next claim hands out Fence+1). Returns
    (wrote, unblocked). Under `serial.blocking_writes`.
    """
    return blocking_writes(core, _reexamine, core, actor, now, cur, note)


def _reexamine(
    core: Core, actor: str, now: Instant, cur: TaskState, note: str
) -> tuple[bool, bool]:
    key = cur.key
    load = core.store.load
    while True:
        if cur.status != BLOCKED:
            return False, False
        failure = nearest_failed(load, cur.needs)
        if failure is not None:
            if still_blocking(core, cur.blocked_by):
                return False, False
            nxt = cur.replace(blocked_by=failure, updated_by=actor, updated_at=now)
        else:
            nxt = cur.replace(
                status=PENDING,
                blocked_by="",
                owner="",
                lease_until=Instant.ZERO,
                updated_by=actor,
                updated_at=now,
            )
        if not core.swap(key, cur, nxt):
            fresh = load(key)
            if fresh is None:
                return False, False
            cur = fresh
            continue
        if failure is not None:
            core.emit(events.BLOCKED, key, f"key {key} blocked by {failure}")
            return True, False
        core.dispossessed(key, cur, now)  # blocked while claimed: it kept its lease
        core.emit(events.UNBLOCKED, key, f"key {key} unblocked{note}")
        # The read after the write (Go's recheckNeeds): a failure that landed
        # meanwhile blocks the record again, so an un-block opens no escape.
        again = nearest_failed(load, cur.needs)
        if again is not None:
            fresh = load(key)
            if fresh is not None and fresh.status in (PENDING, CLAIMED):
                block_one(core, actor, now, key, fresh, again)
                return True, False
        return True, True


def settle(core: Core, actor: str, now: Instant, roots: Iterable[str], note: str) -> list[str]:
    """Re-examine every blocked record among `roots` and their transitive
    dependents until a full scan changes nothing; the keys un-blocked (sorted).

    Scanning again after every pass that wrote is what closes the race with a
    concurrent blocker (module docstring): the last scan follows the last write.
    Under `serial.blocking_writes`.
    """
    return blocking_writes(core, _settle, core, actor, now, list(roots), note)


def settle_in_blocks(
    core: Core, blocks: Blocks, actor: str, now: Instant, roots: Iterable[str], note: str
) -> list[str]:
    """`settle` through a driver (engine/blocks.py): each scan runs with no
    block open, after every block before it committed; the re-examinations
    it finds land in the driver's blocks. The last scan still follows the last
    write, and each re-examination reads its needs again in its own block."""
    return _settle(core, actor, now, list(roots), note, blocks)


def _settle(
    core: Core,
    actor: str,
    now: Instant,
    roots: list[str],
    note: str,
    blocks: Blocks | None = None,
) -> list[str]:
    unblocked: set[str] = set()

    def one(rec: TaskState) -> tuple[bool, bool]:
        return reexamine(core, actor, now, rec, note)

    while True:
        # Read after every write so far (the last pass's reads follow the last write).
        candidates = [rec for k in roots if (rec := core.store.load(k)) is not None]
        candidates += needs_first(dependents_walk(core.store, roots))
        seen: set[str] = set()
        todo: list[TaskState] = []
        for rec in candidates:
            if rec.key in seen or rec.status != BLOCKED:
                continue
            seen.add(rec.key)
            todo.append(rec)
        results = blocks.each(todo, one) if blocks is not None else [one(r) for r in todo]
        wrote_any = False
        for rec, (wrote, freed) in zip(todo, results, strict=True):
            wrote_any = wrote_any or wrote
            if freed:
                unblocked.add(rec.key)
        if not wrote_any:
            break
    # A record un-blocked and then blocked again by a later failure is not "un-blocked".
    final = []
    for key in unblocked:
        now_rec = core.store.load(key)
        if now_rec is not None and now_rec.status != BLOCKED:
            final.append(key)
    return sorted(final, key=byte_order)
