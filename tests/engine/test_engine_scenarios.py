"""Scenarios (docs/design.md §3.5) the recorded traces cannot reach: races between
threads, store faults, restore conflicts, the empty-key admit, year-0 instants."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta

import pytest

from ledger_cli import errors
from ledger_cli.engine import events
from ledger_cli.engine.events import Recorder
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.memstore import MemStore, MemStoreOptions
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.status import Status

T0 = Instant.parse("2024-01-01T00:00:00Z")
L = timedelta(hours=1)
A = "test-actor"


class Hooked:
    """A MemStore wrapper whose calls can be intercepted by tests."""

    def __init__(self, inner: MemStore | None = None) -> None:
        self.inner = inner or MemStore()
        self.loads: list[str] = []
        self.cas_calls = 0
        self.on_load: Callable[[str], None] | None = None
        self.on_cas: Callable[[str, TaskState], None] | None = None
        self.after_range: Callable[[], None] | None = None

    def load(self, key: str) -> TaskState | None:
        self.loads.append(key)
        rec = self.inner.load(key)
        if self.on_load is not None:
            self.on_load(key)
        return rec

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        self.cas_calls += 1
        if self.on_cas is not None:
            self.on_cas(key, new)
        return self.inner.compare_and_swap(key, old, new)

    def range(self) -> Iterator[TaskState]:
        view = list(self.inner.range())
        if self.after_range is not None:
            hook, self.after_range = self.after_range, None
            hook()
        return iter(view)

    def batch(self) -> AbstractContextManager[None]:
        return self.inner.batch()

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> Hooked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fail_with(message: str) -> Callable[..., None]:
    def hook(*_: object) -> None:
        raise errors.StoreError(message)

    return hook


def finish(ledger: Ledger, key: str, status: str, *needs: str) -> None:
    assert ledger.admit(A, key, 1, None, T0, *needs)
    fence = ledger.claim(A, key, "owner-setup", L, T0)
    ledger.complete(A, key, "owner-setup", fence, status, T0)


# --- admission ---------------------------------------------------------------


def test_empty_key_admit_is_refused_before_any_store_call() -> None:
    store = Hooked()
    ledger = Ledger(store)
    with pytest.raises(errors.ValidationError) as info:
        ledger.admit(A, "", 1, "payload", T0)
    assert str(info.value) == "ledger: idempotency key must not be empty"
    assert store.loads == [] and store.cas_calls == 0
    assert ledger.state("") is None


def test_admit_record_fields_and_datetime_now() -> None:
    ledger = Ledger()
    assert ledger.admit(A, "k1", 1, "payload", datetime(2024, 1, 1, tzinfo=UTC))
    rec = ledger.state("k1")
    assert rec == TaskState(
        key="k1",
        status="pending",
        sequence=1,
        task="payload",
        created_by=A,
        created_at=T0,
        updated_by=A,
        updated_at=T0,
    )
    assert rec is not None and rec.needs is None


def test_admit_race_recheck_blocks_a_record_whose_need_failed_meanwhile() -> None:
    # docs/design.md §2.2: B reads A as pending, A fails (its walk sees no B), B inserts,
    # the recheck finds A failed and blocks B.
    store = Hooked()
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit(A, "A", 1, None, T0)
    fence = ledger.claim(A, "A", "owner-a", L, T0)
    fired = []

    def fail_a_before_b_inserts(key: str, new: TaskState) -> None:
        if key == "B" and not fired:
            fired.append(True)
            ledger.complete(A, "A", "owner-a", fence, "failed", T0)

    store.on_cas = fail_a_before_b_inserts
    bus.events.clear()
    assert ledger.admit(A, "B", 1, None, T0, "A") is True
    rec = ledger.state("B")
    assert rec is not None and (rec.status, rec.blocked_by) == ("blocked", "A")
    assert [(e.name, e.data) for e in bus.events] == [
        (events.COMPLETED, "key A completed as failed by owner-a"),
        (events.BLOCKED, "key B blocked by A"),
    ]
    with pytest.raises(errors.NotClaimedError):
        ledger.claim(A, "B", "owner-b", L, T0)


def test_admit_recheck_load_fault_raises_but_record_is_stored_pending() -> None:
    # docs/design.md §2.2
    store = Hooked()
    ledger = Ledger(store)
    ledger.admit(A, "A", 1, None, T0)
    inserted = []
    store.on_cas = lambda key, new: inserted.append(key)

    def fault_after_insert(key: str) -> None:
        if inserted and key == "A":
            raise errors.StoreError("disk on fire")

    store.on_load = fault_after_insert
    with pytest.raises(errors.StoreError, match="disk on fire"):
        ledger.admit(A, "B", 1, None, T0, "A")
    store.on_load = None
    rec = ledger.state("B")
    assert rec is not None and rec.status == "pending"


@pytest.mark.parametrize("fault", ["load", "cas"])
def test_store_faults_propagate_unchanged_from_admit(fault: str) -> None:
    store = Hooked()
    if fault == "load":
        store.on_load = fail_with("load failed")
    else:
        store.on_cas = fail_with("cas failed")
    with pytest.raises(errors.StoreError, match=f"{fault} failed"):
        Ledger(store).admit(A, "k1", 1, None, T0)
    assert store.inner.load("k1") is None


# --- leases ------------------------------------------------------------------


def test_claim_fails_closed_when_an_ancestor_cannot_be_read() -> None:
    # docs/design.md §2.3
    store = Hooked()
    ledger = Ledger(store)
    ledger.admit(A, "C", 1, None, T0, "B")
    store.on_load = lambda key: fail_with("B unreadable")() if key == "B" else None
    with pytest.raises(errors.StoreError, match="B unreadable"):
        ledger.claim(A, "C", "owner-c", L, T0)
    store.on_load = None
    rec = ledger.state("C")
    assert rec is not None and (rec.status, rec.owner) == ("pending", "")


def test_claim_walks_a_chain_with_exactly_one_load_per_record() -> None:
    # docs/design.md §2.3: k0 -> k1 -> ... -> k5, Claim(k0) makes 6 loads.
    store = Hooked()
    ledger = Ledger(store)
    ledger.admit(A, "k5", 1, None, T0)
    for i in range(4, -1, -1):
        ledger.admit(A, f"k{i}", 1, None, T0, f"k{i + 1}")
    store.loads.clear()
    assert ledger.claim(A, "k0", "owner-a", L, T0) == 1
    assert store.loads == ["k0", "k1", "k2", "k3", "k4", "k5"]


def _race(*calls: Callable[[], object]) -> list[object]:
    """Run calls in threads; every thread loads before any thread writes."""
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except errors.LedgerError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results


def _barrier_on_first_loads(store: Hooked, parties: int) -> None:
    barrier = threading.Barrier(parties, timeout=5)
    count = [0]
    lock = threading.Lock()

    def hook(_: str) -> None:
        with lock:
            count[0] += 1
            mine = count[0]
        if mine <= parties:
            barrier.wait()

    store.on_load = hook


def test_two_concurrent_claims_grant_exactly_one_fence() -> None:
    # docs/design.md §2.3
    store = Hooked()
    ledger = Ledger(store)
    ledger.admit(A, "k1", 1, None, T0)
    _barrier_on_first_loads(store, 2)
    results = _race(
        lambda: ledger.claim(A, "k1", "owner-a", L, T0),
        lambda: ledger.claim(A, "k1", "owner-b", L, T0),
    )
    fences = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if isinstance(r, errors.LeaseActiveError)]
    assert fences == [1] and len(refused) == 1
    assert store.cas_calls >= 2


def test_two_concurrent_renews_with_one_fence_both_succeed() -> None:
    # docs/design.md §2.4: the loser's CAS fails on Rev, reloads, retries.
    store = Hooked()
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit(A, "k1", 1, None, T0)
    ledger.claim(A, "k1", "owner-a", L, T0)
    bus.events.clear()
    store.cas_calls = 0
    _barrier_on_first_loads(store, 2)
    results = _race(
        lambda: ledger.renew(A, "k1", "owner-a", 1, L, T0 + timedelta(minutes=1)),
        lambda: ledger.renew(A, "k1", "owner-a", 1, L, T0 + timedelta(minutes=2)),
    )
    assert results == [None, None]
    assert [e.name for e in bus.events] == [events.RENEWED, events.RENEWED]
    assert store.cas_calls >= 3
    rec = ledger.state("k1")
    assert rec is not None and rec.rev == 3


def test_two_concurrent_completes_exactly_one_wins() -> None:
    # docs/design.md §2.4
    store = Hooked()
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit(A, "k1", 1, None, T0)
    ledger.claim(A, "k1", "owner-a", L, T0)
    bus.events.clear()
    _barrier_on_first_loads(store, 2)
    results = _race(
        lambda: ledger.complete(A, "k1", "owner-a", 1, "completed", T0),
        lambda: ledger.complete(A, "k1", "owner-a", 1, Status.FAILED, T0),
    )
    winners = [i for i, r in enumerate(results) if r is None]
    assert len(winners) == 1
    assert isinstance(results[1 - winners[0]], errors.NotClaimedError)
    rec = ledger.state("k1")
    assert rec is not None and rec.status == ("completed", "failed")[winners[0]]
    assert [e.name for e in bus.events] == [events.COMPLETED]


def test_claim_at_year_zero_lands_on_the_zero_instant_and_is_refused() -> None:
    # docs/design.md §2.3: now = zero - 1h, lease 1h => LeaseUntil is the zero time.
    now = Instant.ZERO - timedelta(hours=1)
    assert str(now) == "0000-12-31T23:00:00Z"
    ledger = Ledger()
    ledger.admit(A, "k1", 1, None, now)
    with pytest.raises(errors.ValidationError, match="zero LeaseUntil"):
        ledger.claim(A, "k1", "owner-a", L, now)
    rec = ledger.state("k1")
    assert rec is not None and rec.status == "pending"


def test_one_nanosecond_ticks_fence_out_earlier_holders() -> None:
    # docs/design.md §2.5
    ledger = Ledger()
    ledger.admit(A, "k1", 1, None, T0)
    assert ledger.claim(A, "k1", "original", L, T0) == 1
    assert ledger.takeover(A, "k1", "taker-1", L, (T0 + L).add_ns(1)) == 2
    assert ledger.takeover(A, "k1", "taker-2", L, (T0 + 2 * L).add_ns(2)) == 3
    with pytest.raises(errors.FencedError):
        ledger.complete(A, "k1", "original", 1, "completed", T0)
    ledger.complete(A, "k1", "taker-2", 3, "failed", T0)
    rec = ledger.state("k1")
    assert rec is not None and rec.status == "failed"


@pytest.mark.parametrize("status", ["", "failed ", "pending", "blocked", None, 1])
def test_complete_accepts_only_completed_or_failed(status: object) -> None:
    with pytest.raises(errors.UnknownStatusError) as info:
        Ledger().complete(A, "ghost", "o", 0, status, T0)  # type: ignore[arg-type]
    assert str(info.value) == "ledger: status must be StatusCompleted or StatusFailed"


# --- the failure walk ---------------------------------------------------------


def test_walk_range_fault_returns_error_after_the_failure_landed() -> None:
    # docs/design.md §2.7
    store = Hooked()
    ledger = Ledger(store)
    ledger.admit(A, "root", 1, None, T0)
    ledger.admit(A, "dep", 1, None, T0, "root")
    fence = ledger.claim(A, "root", "owner-a", L, T0)
    store.after_range = fail_with("range failed")
    with pytest.raises(errors.StoreError, match="range failed"):
        ledger.complete(A, "root", "owner-a", fence, "failed", T0)
    root, dep = ledger.state("root"), ledger.state("dep")
    assert root is not None and root.status == "failed"
    assert dep is not None and dep.status == "pending"


def test_walk_skips_a_dependent_completed_after_the_range() -> None:
    # docs/design.md §2.7: B is completed by its owner right after the walk's Range.
    store = Hooked()
    bus = Recorder()
    ledger = Ledger(store, bus)
    ledger.admit(A, "A", 1, None, T0)
    ledger.admit(A, "B", 1, None, T0, "A")
    fa = ledger.claim(A, "A", "owner-a", L, T0)
    fb = ledger.claim(A, "B", "owner-b", L, T0)
    store.after_range = lambda: ledger.complete(A, "B", "owner-b", fb, "completed", T0)
    ledger.complete(A, "A", "owner-a", fa, "failed", T0)
    b = ledger.state("B")
    assert b is not None and (b.status, b.blocked_by) == ("completed", "")
    assert events.BLOCKED not in [e.name for e in bus.events]


def test_claim_racing_the_walk_is_refused_and_blocks() -> None:
    # docs/design.md §2.7: a Claim(B) right after the walk's Range (A already failed).
    store = Hooked()
    ledger = Ledger(store)
    ledger.admit(A, "A", 1, None, T0)
    ledger.admit(A, "B", 1, None, T0, "A")
    fa = ledger.claim(A, "A", "owner-a", L, T0)
    outcome: list[object] = []

    def claim_b() -> None:
        try:
            outcome.append(ledger.claim(A, "B", "owner-b", L, T0))
        except errors.LedgerError as exc:
            outcome.append(exc)

    store.after_range = claim_b
    ledger.complete(A, "A", "owner-a", fa, "failed", T0)
    assert len(outcome) == 1 and isinstance(outcome[0], errors.NotClaimedError)
    b = ledger.state("B")
    assert b is not None and (b.status, b.blocked_by) == ("blocked", "A")


# --- snapshot and restore ----------------------------------------------------


def test_empty_store_snapshot_is_null_tasks() -> None:
    snap = Ledger().snapshot()
    assert snap.tasks is None
    assert snap.encode() == b'{"Tasks":null}'


def test_restore_round_trip_keeps_blocked_dependents() -> None:
    # docs/design.md §2.9
    src = Ledger()
    finish(src, "root", "failed")
    src.admit(A, "dep", 1, None, T0, "root")
    data = src.snapshot().encode()
    dst = Ledger()
    dst.restore(Snapshot.decode(data))
    root, dep = dst.state("root"), dst.state("dep")
    assert root is not None and root.status == "failed"
    assert dep is not None and (dep.status, dep.blocked_by) == ("blocked", "root")
    # Restore inserts, so every Rev starts again at 0.
    assert dst.snapshot() == Snapshot(tuple(r.replace(rev=0) for r in src.snapshot().tasks or ()))


def test_restore_into_an_occupied_key_is_a_conflict_and_earlier_inserts_stay() -> None:
    # docs/design.md §2.9
    ledger = Ledger()
    ledger.admit(A, "k1", 1, None, T0)
    snap = Snapshot((TaskState(key="a0", status="pending"), *(ledger.snapshot().tasks or ())))
    with pytest.raises(errors.RestoreConflictError) as info:
        ledger.restore(snap)
    assert str(info.value) == 'ledger: restore: key "k1" already has a record'
    assert ledger.state("a0") is not None


def test_restore_through_a_failing_store_returns_its_error() -> None:
    # docs/design.md §2.9
    store = Hooked()
    store.on_cas = fail_with("cas refused")
    with pytest.raises(errors.StoreError, match="cas refused"):
        Ledger(store).restore(Snapshot((TaskState(key="k1", status="pending"),)))


def test_restore_resets_rev_and_applies_the_fence_floor() -> None:
    store = MemStore(MemStoreOptions(max_entries=1, now=lambda: T0))
    ledger = Ledger(store)
    ledger.restore(Snapshot((TaskState(key="a", status="completed", fence=7, rev=9),)))
    ledger.restore(Snapshot((TaskState(key="b", status="pending", fence=0, rev=4),)))
    assert store.load("a") is None  # evicted by b's insert: the floor is now 7
    b = store.load("b")
    assert b is not None and (b.fence, b.rev) == (0, 0)
    ledger.restore(Snapshot((TaskState(key="c", status="pending", fence=0, rev=4),)))
    c = store.load("c")
    assert c is not None and (c.fence, c.rev) == (7, 0)


# --- MemStore ----------------------------------------------------------------


def test_negative_max_entries_message_wraps_the_sentinel() -> None:
    with pytest.raises(errors.InvalidMaxEntriesError) as info:
        MemStore(MemStoreOptions(max_entries=-1))
    assert str(info.value) == (
        "ledger: MemStoreOptions.MaxEntries must not be negative, got -1: "
        "ledger: MaxEntries must not be negative"
    )


def test_cas_contract() -> None:
    # docs/design.md §3
    store = MemStore()
    first = TaskState(key="k1", status="pending", sequence=1, task="first")
    assert store.compare_and_swap("k1", None, first)
    stored = store.load("k1")
    assert stored is not None and stored.rev == 0
    assert not store.compare_and_swap("k1", None, first)
    assert not store.compare_and_swap("k1", stored.replace(rev=1), stored.replace(task="x"))
    assert store.compare_and_swap("k1", stored.replace(task="other"), stored.replace(task="third"))
    now = store.load("k1")
    assert now is not None and (now.task, now.rev) == ("third", 1)
    assert not store.compare_and_swap("ghost", TaskState(sequence=1), TaskState(key="ghost"))
    assert store.load("ghost") is None


def test_eviction_scan_budget_can_leave_the_store_over_its_cap() -> None:
    # docs/design.md §3.1
    live = T0 + L
    store = MemStore(MemStoreOptions(max_entries=9, now=lambda: T0))
    for i in range(1, 9):
        rec = TaskState(key=f"k{i}", status="claimed", owner="o", lease_until=live)
        assert store.compare_and_swap(rec.key, None, rec)
    for key in ("done", "e"):
        assert store.compare_and_swap(key, None, TaskState(key=key, status="completed"))
    assert len(store) == 10
    k1 = store.load("k1")
    assert k1 is not None and store.compare_and_swap("k1", k1, k1)
    assert len(store) == 9 and store.load("done") is None


def test_fence_floor_lifts_new_inserts_but_never_lowers_a_fence() -> None:
    # docs/design.md §3.1
    store = MemStore(MemStoreOptions(max_entries=1, now=lambda: T0))
    store.compare_and_swap("a", None, TaskState(key="a", status="pending", fence=7))
    store.compare_and_swap("b", None, TaskState(key="b", status="pending"))
    assert store.load("a") is None
    store.compare_and_swap("a", None, TaskState(key="a", status="pending"))
    a = store.load("a")
    assert a is not None and a.fence == 7
    store.compare_and_swap("c", None, TaskState(key="c", status="pending", fence=9))
    c = store.load("c")
    assert c is not None and c.fence == 9


@pytest.mark.parametrize(("offset", "kept"), [(-L, False), (L, True)])
def test_wall_clock_eviction(offset: timedelta, kept: bool) -> None:
    # docs/design.md §3.1: Now nil resolves to the wall clock.
    store = MemStore(MemStoreOptions(max_entries=1))
    lease = Instant.now() + offset
    held = TaskState(key="held", status="claimed", owner="o", lease_until=lease)
    store.compare_and_swap("held", None, held)
    store.compare_and_swap("fresh", None, TaskState(key="fresh", status="pending"))
    assert (store.load("held") is not None) is kept


def test_bus_failures_are_ignored() -> None:
    class Broken:
        def emit(self, event: events.Event) -> None:
            raise RuntimeError("no subscriber")

    ledger = Ledger(None, Broken())
    assert ledger.admit(A, "k1", 1, None, T0)
    assert ledger.claim(A, "k1", "o", L, T0) == 1
