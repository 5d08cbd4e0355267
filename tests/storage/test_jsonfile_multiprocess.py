"""JsonFileStore under real processes: contention, claim races, and SIGKILL at random moments.

`LEDGER_KILLS=N` raises the number of kills of the crash test (default 120).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import struct
import time
from collections.abc import Callable
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import LeaseActiveError
from ledger_cli.stores.jsonfile import JsonFileStore

FORK = multiprocessing.get_context("fork")
T0 = Instant.parse("2024-01-01T00:00:00Z")
PROCS = 8


def _rec(key: str, sequence: int, task: Any = None) -> TaskState:
    return TaskState(
        key=key,
        status="pending",
        sequence=sequence,
        task=task,
        created_by="mp",
        created_at=T0,
        updated_by="mp",
        updated_at=T0,
    )


def _run(
    procs: list[Any], progress: Callable[[], object] = lambda: None, stall: float = 120
) -> None:
    """Run the workers to the end. A hang is `stall` seconds without progress (what
    `progress()` returns stays the same), not a total time: a loaded machine is slow."""
    for p in procs:
        p.start()
    seen, since = progress(), time.monotonic()
    while any(p.is_alive() for p in procs):
        for p in procs:
            p.join(0.2)
        now = progress()
        if now != seen:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since > stall:
            for p in procs:
                p.kill()
            pytest.fail(f"no progress for {stall:g}s: a worker process hung")
    for p in procs:
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"


# -- no lost update ----------------------------------------------------------------------------

KEYS = ("hot-a", "hot-b", "hot-c")
INCREMENTS = 15


def _hammer(root: str, seed: int, results: Any) -> None:
    store = JsonFileStore(root)
    rng = random.Random(seed)
    plan = [k for k in KEYS for _ in range(INCREMENTS)]
    rng.shuffle(plan)
    retries = 0
    for key in plan:
        while True:
            cur = store.load(key)
            assert cur is not None
            nxt = cur.replace(sequence=cur.sequence + 1, updated_by=f"p{seed}")
            if store.compare_and_swap(key, cur, nxt):
                break
            retries += 1
    results.put(retries)


def test_concurrent_compare_and_swap_loses_no_update(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    store = JsonFileStore(root)
    for key in KEYS:
        assert store.compare_and_swap(key, None, _rec(key, 0))
    results = FORK.Queue()

    def revs() -> list[int]:
        return [rec.rev if (rec := store.load(key)) is not None else -1 for key in KEYS]

    _run([FORK.Process(target=_hammer, args=(root, i, results)) for i in range(PROCS)], revs)
    retries = sum(results.get(timeout=5) for _ in range(PROCS))
    for key in KEYS:
        cur = store.load(key)
        assert cur is not None
        # Every increment landed exactly once: no lost update, no double apply.
        assert cur.sequence == PROCS * INCREMENTS, (key, cur.sequence)
        assert cur.rev == PROCS * INCREMENTS
    # The keys really were contended (else this test would prove nothing).
    assert retries > 0
    print(f"\n{PROCS} processes x {len(KEYS) * INCREMENTS} increments: {retries} CAS retries")


# -- claim races ----------------------------------------------------------------------------------

CLAIM_KEYS = [f"job-{i}" for i in range(12)]


def _claimer(root: str, idx: int, now: Instant, start: Any, results: Any) -> None:
    ledger = Ledger(JsonFileStore(root))
    order = list(CLAIM_KEYS)
    random.Random(idx).shuffle(order)
    won: list[tuple[str, int]] = []
    start.wait()  # every claimer is ready: they race from here
    for key in order:
        try:
            fence = ledger.claim("mp", key, f"worker-{idx}", timedelta(hours=1), now)
        except LeaseActiveError:
            continue
        won.append((key, fence))
    results.put((idx, won))


def _race(root: str, now: Instant) -> dict[str, list[tuple[int, int]]]:
    results = FORK.Queue()
    start = FORK.Barrier(PROCS)
    procs = [
        FORK.Process(target=_claimer, args=(root, i, now, start, results)) for i in range(PROCS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    grants: dict[str, list[tuple[int, int]]] = {k: [] for k in CLAIM_KEYS}
    for _ in procs:
        idx, won = results.get(timeout=5)
        for key, fence in won:
            grants[key].append((idx, fence))
    return grants


def test_racing_claims_grant_one_fence_per_key_per_lease(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    ledger = Ledger(JsonFileStore(root))
    for key in CLAIM_KEYS:
        assert ledger.admit("mp", key, 1, {"n": key}, T0)
    for lease_round, now in enumerate((T0, T0 + timedelta(hours=2)), start=1):
        grants = _race(root, now)
        for key, winners in grants.items():
            assert len(winners) == 1, f"round {lease_round}: {key} granted to {winners}"
            idx, fence = winners[0]
            assert fence == lease_round  # the second round claims over the expired lease
            rec = ledger.state(key)
            assert rec is not None
            assert (rec.owner, rec.fence, rec.status) == (f"worker-{idx}", fence, "claimed")


# -- SIGKILL at random moments ------------------------------------------------------------------

NKEYS = 6


def _unit_writes(u: int) -> tuple[list[tuple[str, int, Any]], bool]:
    """Unit u (1, 2, …): the (key, sequence, task) writes it makes, and whether it is one
    batch (with a history line) or a single durable compare-and-swap."""
    if u % 3 == 0:
        writes: list[tuple[str, int, Any]] = [
            (f"k{(u + j) % NKEYS}", u, {"u": u, "j": j}) for j in range(3)
        ]
        if u % 2 == 0:
            writes.append((f"new-{u}", u, "fresh"))
        return writes, True
    return [(f"k{u % NKEYS}", u, {"u": u})], False


def _history_entry(u: int) -> HistoryEntry:
    return HistoryEntry(
        time=str(T0 + timedelta(seconds=u)),
        actor="crash",
        event="ledger.admitted",
        key=f"unit-{u}",
        fence=u,
        data=f"unit {u}",
    )


def _apply_unit(store: JsonFileStore, u: int) -> None:
    writes, batched = _unit_writes(u)

    def write(key: str, sequence: int, task: Any) -> None:
        cur = store.load(key)
        if cur is None:
            assert store.compare_and_swap(key, None, _rec(key, sequence, task))
        else:
            assert store.compare_and_swap(key, cur, cur.replace(sequence=sequence, task=task))

    if batched:
        with store.batch():
            for w in writes:
                write(*w)
            store.append_history([_history_entry(u)])
    else:
        write(*writes[0])


def _writer(root: str, first_unit: int, ack: Connection) -> None:
    store = JsonFileStore(root)  # also replays a journal a kill left
    u = first_unit
    while True:
        _apply_unit(store, u)
        ack.send_bytes(struct.pack("<I", u))  # acknowledged: durable before this line
        u += 1


class Model:
    """The state a prefix of the units produces: key -> (sequence, rev, task); history."""

    def __init__(self) -> None:
        self.states: list[tuple[dict[str, tuple[int, int, Any]], list[int]]] = [({}, [])]

    def after(self, n: int) -> tuple[dict[str, tuple[int, int, Any]], list[int]]:
        while len(self.states) <= n:
            u = len(self.states)
            records, history = self.states[-1]
            records = dict(records)
            writes, batched = _unit_writes(u)
            for key, seq, task in writes:
                rev = records[key][1] + 1 if key in records else 0
                records[key] = (seq, rev, task)
            self.states.append((records, [*history, u] if batched else history))
        return self.states[n]


def _observed(root: str) -> tuple[dict[str, tuple[int, int, Any]], list[int]]:
    store = JsonFileStore(root)  # must open whatever the kill left
    records = {}
    for rec in store.range():  # reads and validates every record file
        rec.validate()
        records[rec.key] = (rec.sequence, rec.rev, rec.task)
    history = [e.fence for e in store.read_history()]
    return records, history


def test_sigkill_at_random_moments_leaves_a_prefix_of_acknowledged_writes(
    tmp_path: Path,
) -> None:
    kills = int(os.environ.get("LEDGER_KILLS", "120"))
    root = str(tmp_path / "store")
    model = Model()
    rng = random.Random(20240101)
    done = 0  # units the store holds
    in_flight_landed = journals = progressed = 0
    for _ in range(kills):
        recv, send = FORK.Pipe(duplex=False)
        proc = FORK.Process(target=_writer, args=(root, done + 1, send))
        proc.start()
        send.close()
        # Half the kills strike at any moment from the start (opening, replaying a
        # journal…); the other half once the writer has acknowledged a unit, so that
        # the writer makes progress however slow the machine is.
        if rng.random() < 0.5 and recv.poll(60):
            progressed += 1
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid or 0, signal.SIGKILL)
        proc.join(10)
        assert proc.exitcode == -signal.SIGKILL
        acked = done
        while recv.poll():
            try:
                acked = struct.unpack("<I", recv.recv_bytes())[0]
            except EOFError:
                break
        recv.close()
        journals += os.path.exists(os.path.join(root, "journal.json"))  # killed mid-commit
        state = _observed(root)
        if state == model.after(acked):
            done = acked
        elif state == model.after(acked + 1):  # killed after the write, before its ack
            done = acked + 1
            in_flight_landed += 1
        else:
            want = model.after(acked)
            raise AssertionError(
                f"after unit {acked}: store holds {state}, expected {want} "
                f"(or the state one unit later)"
            )
    assert done >= progressed, f"only {done} units in {kills} kills: the writer barely ran"
    print(
        f"\n{kills} kills: {done} units durable, {in_flight_landed} in-flight units landed, "
        f"{journals} journals replayed"
    )


# -- first open: many processes create the same new store at once ----------------------------

FIRST_OPEN_ROUNDS = 12


def _first_open(root: str, n: int, start: Any, errors: Any) -> None:
    try:
        start.wait()
        with JsonFileStore(root) as store:
            store.compare_and_swap(f"k{n}", None, _rec(f"k{n}", 1))
    except BaseException as exc:
        errors.put(f"process {n}: {exc}")
        raise


def test_concurrent_first_opens_all_see_one_store(tmp_path: Path) -> None:
    """A process that sees the store uninitialised, then finds the metadata another
    process just wrote, joins that store instead of refusing it as foreign."""
    for r in range(FIRST_OPEN_ROUNDS):
        root = str(tmp_path / f"store{r}")
        start = FORK.Barrier(PROCS)
        errors = FORK.Queue()
        procs = [
            FORK.Process(target=_first_open, args=(root, n, start, errors)) for n in range(PROCS)
        ]
        try:
            _run(procs)
        except AssertionError:
            raise AssertionError(errors.get(timeout=5)) from None
        with JsonFileStore(root) as store:
            assert sorted(rec.key for rec in store.range()) == sorted(f"k{n}" for n in range(PROCS))
