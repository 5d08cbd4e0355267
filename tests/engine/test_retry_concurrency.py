"""`retry` racing with admits-with-needs, claims, failures and cancels in other
processes never leaves an *orphaned block* (docs/design.md §6.2).

Round after round, WORKERS processes work on one small dependency graph of
the same keys at once, each with its own store handle: admit with needs (a
need may be admitted later, or never), claim and complete as completed or
failed, retry (inside `store.batch()`, as the command line does, or not),
cancel. After each round every process stops at a barrier and the test checks
the whole store: no record is blocked unless a failed record is in its
transitive needs. The check is `ledger doctor`'s own (`engine/invariants.py`,
`find_orphaned_blocks`: one whole-store walk, not the engine's per-key walks
that retry uses), and `test_checker_finds_an_orphan` shows it can fail.

The *batched* variant runs every operation inside a batch, as the command line
does (`Session.write`: a refusal commits what was written, then raises), and
admits two or three keys per batch, like `admit --batch`. On PostgreSQL a
batch is a READ COMMITTED transaction: both sides of the race (a block and the
un-block of its blocker, each with its read after its write) then sit in open
transactions at once, which is the case `engine/serial.py` closes.

The figures (rounds, processes, operations, records checked, and how often the
repair paths ran) are printed (`pytest -s`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import random
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ledger_cli import errors
from ledger_cli.engine import serial
from ledger_cli.engine.events import Event
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.invariants import find_orphaned_blocks
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.rerun import rerun
from ledger_cli.engine.store import Store
from tests.sql_support import waiting_on_a_lock
from tests.stores import KINDS

WORKERS = 4
ROUNDS = 30
OPS = 24
KEYS = 7
T0 = Instant.parse("2026-01-01T00:00:00Z")
LEASE = timedelta(hours=1)
TIMEOUT = 120.0

Spec = tuple[str, str]
T = TypeVar("T")
MODES = ("mixed", "batched")


@pytest.fixture(params=["json", "sqlite", "postgresql"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Spec]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        yield (request.param, location)


@pytest.fixture(params=["postgresql"])
def pg_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Spec]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        yield (request.param, location)


def open_spec(spec: Spec) -> Store:
    kind, location = spec
    return KINDS[kind].open(location, lambda: T0)


# -- the invariant: doctor's checker (engine/invariants.py), one for both ---------------


def orphaned_blocks(records: dict[str, TaskState]) -> list[str]:
    """The keys `ledger doctor` would report as orphaned blocks."""
    return [o.key for o in find_orphaned_blocks(records.values())]


def test_checker_finds_an_orphan() -> None:
    """The check can fail: a block whose failure was reopened by hand is found."""
    ledger = Ledger()
    ledger.admit("t", "root", 1, None, T0)
    ledger.admit("t", "dep", 1, None, T0, "root")
    fence = ledger.claim("t", "root", "o", LEASE, T0)
    ledger.complete("t", "root", "o", fence, "failed", T0)
    store = ledger.store
    records = {r.key: r for r in store.range()}
    assert orphaned_blocks(records) == []
    cur = records["root"]
    assert store.compare_and_swap("root", cur, cur.replace(status="pending"))  # not a retry
    assert orphaned_blocks({r.key: r for r in store.range()}) == ["dep"]


class Interleaved:
    """A MemStore whose next compare-and-swap of one key first runs `before`
    (another process's whole operation, slotted between a read and a write)."""

    def __init__(self) -> None:
        from ledger_cli.engine.memstore import MemStore

        self.inner = MemStore()
        self.hook: tuple[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        if self.hook is not None and self.hook[0] == key:
            _, before = self.hook
            self.hook = None
            before()
        return self.inner.compare_and_swap(key, old, new)


def test_two_retries_of_a_failed_cycle_do_not_vouch_for_each_other() -> None:
    """x needs y, y needs x, both failed. Retry x reads y failed, then (before
    x is written) a retry of y reads x failed and blocks y by x; x is then
    written blocked by y. Each block names the other and no failure is left:
    the read after x's write walks the cycle, finds no failure, and repairs."""
    store = Interleaved()
    ledger = Ledger(store)  # type: ignore[arg-type]
    ledger.admit("t", "x", 1, None, T0, "y")
    ledger.admit("t", "y", 1, None, T0, "x")
    for key in ("x", "y"):
        ledger.cancel("t", key, T0)
    records = {r.key: r for r in store.range()}
    assert [records[k].status for k in ("x", "y")] == ["failed", "failed"]
    store.hook = ("x", lambda: ledger.retry("t", "y", T0))
    ledger.retry("t", "x", T0)
    records = {r.key: r for r in store.range()}
    assert orphaned_blocks(records) == []
    assert [records[k].status for k in ("x", "y")] == ["pending", "pending"]


# -- workers ------------------------------------------------------------------------------


class Counting:
    """A bus counting events by name, and the repairs made by the read after a block."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def emit(self, event: Event) -> None:
        self.names[event.name] += 1
        if event.name == "ledger.unblocked" and " by retry of " not in event.data:
            self.names["repair.unblocked_by_blocker"] += 1


@contextlib.contextmanager
def written(store: Store) -> Iterator[None]:
    """One batch as the command line writes one (`Session.write`): a refusal
    commits what the operation wrote before it, then is raised."""
    refusal: errors.LedgerError | None = None
    with store.batch():
        try:
            yield
        except errors.StoreError:
            raise
        except errors.LedgerError as exc:
            refusal = exc
    if refusal is not None:
        raise refusal


def needs_for(rng: random.Random, keys: list[str], i: int) -> list[str]:
    pool = keys[:i] + ([keys[-1]] if i < len(keys) - 1 and rng.random() < 0.2 else [])
    return rng.sample(pool, k=min(len(pool), rng.randint(0, 2)))


def in_batch(store: Store, fn: Callable[[], T], ops: Counter[str]) -> T:
    """`fn()` in one batch as the command line runs one (`Session.writes`):
    a refusal commits what was written, then is raised; a batch PostgreSQL
    rolled back to break a deadlock is run again (engine/rerun.py)."""

    def once() -> T:
        with written(store):
            result = fn()
        return result

    def again() -> None:
        ops["rerun_after_deadlock"] += 1

    return rerun(once, before_again=again)


def one_op(
    ledger: Ledger,
    rng: random.Random,
    me: str,
    keys: list[str],
    ops: Counter[str],
    mode: str = "mixed",
) -> None:
    now = T0
    pick = rng.random()
    i = rng.randrange(len(keys))
    key = keys[i]
    batched = mode == "batched"

    def unit(fn: Callable[[], T]) -> T:
        return in_batch(ledger.store, fn, ops) if batched else fn()

    try:
        if pick < 0.15 and batched:  # `admit --batch`: two or three keys, one batch
            # In key order, as two `admit --batch` runs of one file would go: batches
            # inserting the same keys in opposite orders deadlock on the rows alone.
            picks = sorted(rng.sample(range(len(keys)), k=rng.randint(2, 3)))
            entries = [(keys[j], needs_for(rng, keys, j)) for j in picks]

            def admit_all() -> None:
                if any(needs for _, needs in entries):  # as `admit --batch` does
                    serial.take(ledger.store)
                for k, needs in entries:
                    ledger.admit(me, k, 1, {"by": me}, now, *needs)

            in_batch(ledger.store, admit_all, ops)
            ops["admit"] += len(entries)
        elif pick < 0.30:  # batched: `ledger admit`, one key in its own batch
            needs = needs_for(rng, keys, i)
            unit(lambda: ledger.admit(me, key, 1, {"by": me}, now, *needs))
            ops["admit"] += 1
        elif pick < 0.60:
            fence = unit(lambda: ledger.claim(me, key, me, LEASE, now))
            status = "failed" if rng.random() < 0.5 else "completed"
            unit(lambda: ledger.complete(me, key, me, fence, status, now))
            ops[f"complete_{status}"] += 1
        elif pick < 0.92:
            failed = [k for k in keys if (rec := ledger.state(k)) and rec.status == "failed"]
            key = rng.choice(failed) if failed else key
            if batched or rng.random() < 0.5:
                in_batch(ledger.store, lambda: ledger.retry(me, key, now, "test"), ops)
            else:
                ledger.retry(me, key, now, "test")
            ops["retry"] += 1
        else:
            unit(lambda: ledger.cancel(me, key, now, "test"))
            ops["cancel"] += 1
    except (
        errors.NoKeyError,
        errors.LeaseActiveError,
        errors.NotClaimedError,
        errors.FencedError,
        errors.NotFailedError,
        errors.AlreadyFinishedError,
    ) as exc:
        ops[f"refused_{exc.code}"] += 1
    # A StoreConflictError (PostgreSQL rolled a transaction back to break a
    # deadlock) no longer reaches here: whoever opened the transaction ran it
    # again (the library for its own, `in_batch` as the command line does).


def worker(n: int, spec: Spec, mode: str, start: Any, done: Any, results: Any) -> None:
    try:
        store = open_spec(spec)
        bus = Counting()
        ledger = Ledger(store, bus)
        ops: Counter[str] = Counter()
        me = f"w{n}"
        for r in range(ROUNDS):
            rng = random.Random(r * 1000 + n)
            keys = [f"r{r:02d}/k{i}" for i in range(KEYS)]
            start.wait()
            for _ in range(OPS):
                one_op(ledger, rng, me, keys, ops, mode)
            done.wait()
        store.close()
        results.put((n, "ok", {"ops": dict(ops), "events": dict(bus.names)}))
    except BaseException:
        results.put((n, "error", traceback.format_exc()))
        raise


def test_retry_never_leaves_an_orphaned_block(spec: Spec) -> None:
    race(spec, "mixed")


def test_batched_blocks_and_unblocks_never_leave_an_orphaned_block(spec: Spec) -> None:
    """Both sides of the race in batches at once (PostgreSQL: open transactions)."""
    race(spec, "batched")


def race(spec: Spec, mode: str) -> None:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx: Any = multiprocessing.get_context(method)
    start = ctx.Barrier(WORKERS + 1, timeout=TIMEOUT)
    done = ctx.Barrier(WORKERS + 1, timeout=TIMEOUT)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(n, spec, mode, start, done, results), daemon=True)
        for n in range(WORKERS)
    ]
    for p in procs:
        p.start()
    checked = 0
    statuses: Counter[str] = Counter()
    problems: list[str] = []
    try:
        for r in range(ROUNDS):
            start.wait()
            done.wait()  # every operation of the round has returned
            with open_spec(spec) as store:
                records = {rec.key: rec for rec in store.range()}
            checked += len(records)
            statuses.update(
                rec.status for rec in records.values() if rec.key.startswith(f"r{r:02d}/")
            )
            orphans = [k for k in orphaned_blocks(records) if k.startswith(f"r{r:02d}/")]
            if orphans:  # reported once, for its round; the workers go on
                detail = [
                    (rec.key, rec.status, rec.needs, rec.blocked_by)
                    for rec in records.values()
                    if rec.key.startswith(f"r{r:02d}/")
                ]
                problems.append(f"round {r}: orphaned blocks {orphans} in {detail}")
        out: dict[int, dict[str, Any]] = {}
        for _ in procs:
            n, status, payload = results.get(timeout=TIMEOUT)
            if status != "ok":
                problems.append(f"worker {n}:\n{payload}")
            else:
                out[n] = payload
    except (queue.Empty, Exception) as exc:  # a broken barrier: report the workers' errors
        while not results.empty():
            n, status, payload = results.get_nowait()
            if status != "ok":
                problems.append(f"worker {n}:\n{payload}")
        problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join()
    assert not problems, "\n".join(problems)
    ops: Counter[str] = Counter()
    evs: Counter[str] = Counter()
    for payload in out.values():
        ops.update(payload["ops"])
        evs.update(payload["events"])
    total = sum(ops.values())
    print(
        f"\n{spec[0]} ({mode}): {ROUNDS} rounds x {WORKERS} processes, {total} operations "
        f"({dict(sorted(ops.items()))}); events {dict(sorted(evs.items()))}; "
        f"final statuses {dict(statuses)}; {checked} records checked, 0 orphaned blocks"
    )
    # The races were real: retries reopened work that other processes had blocked.
    assert evs["ledger.retried"] > 0 and evs["ledger.unblocked"] > 0
    assert evs["ledger.blocked"] > 0 and ops["complete_failed"] > 0


# -- the race the lock closes, staged step by step on PostgreSQL ----------------------------


def test_an_unblock_and_a_block_in_open_transactions_at_once(pg_spec: Spec) -> None:
    """`doctor --fix` un-blocks orphan X inside its batch (an un-block by repair,
    no retry); before it commits, `claim Z` (Z needs X) runs in another batch.
    Unserialized (READ COMMITTED, before engine/serial.py), the claim read X
    still blocked, wrote Z blocked by X, re-read X still blocked and committed;
    the repair's reads had all come before: Z was left orphaned. Serialized,
    the claim's block waits for the repair's commit and its read after the
    write finds X pending: Z is repaired at once and stays pending."""
    import threading
    from urllib.parse import quote

    from ledger_cli.engine.core import Core
    from ledger_cli.engine.invariants import OrphanedBlock, fix_orphaned_block

    _, url = pg_spec
    app = "settle_race_z"
    z_url = f"{url}{'&' if '?' in url else '?'}{quote('application_name')}={app}"
    with open_spec(pg_spec) as setup:
        ledger = Ledger(setup)
        ledger.admit("t", "a", 1, None, T0)
        ledger.admit("t", "x", 1, None, T0, "a")
        ledger.admit("t", "z", 1, None, T0, "x")
        x = setup.load("x")
        assert x is not None  # an orphan, as a crash or the Go service could leave one
        assert setup.compare_and_swap("x", x, x.replace(status="blocked", blocked_by="a"))
        assert orphaned_blocks({r.key: r for r in setup.range()}) == ["x"]
    fixer = open_spec(pg_spec)
    claimer = KINDS["postgresql"].open(z_url, lambda: T0)
    outcome: list[BaseException] = []

    def claim_z() -> None:
        try:
            with written(claimer):
                Ledger(claimer).claim("t", "z", "o", LEASE, T0)
        except BaseException as exc:  # judged below
            outcome.append(exc)

    try:
        with written(fixer):
            assert fix_orphaned_block(Core(fixer), "doctor", T0, OrphanedBlock("x", "a"))
            z = threading.Thread(target=claim_z)
            z.start()
            # Wait for a state: the claim's batch has returned, or it waits on a lock.
            while z.is_alive() and not waiting_on_a_lock(url, app):
                z.join(0.01)
        z.join(TIMEOUT)
        assert not z.is_alive()
        # Refused either way: X was blocked when the claim read it.
        assert [type(e) for e in outcome] == [errors.NotClaimedError], outcome
        with open_spec(pg_spec) as check:
            records = {r.key: r for r in check.range()}
        assert orphaned_blocks(records) == []
        assert (records["x"].status, records["z"].status) == ("pending", "pending")
    finally:
        fixer.close()
        claimer.close()
