"""Real processes against one SQL store (SQLite file on disk, PostgreSQL schema):
- 8 processes hammer compare-and-swap on the same keys: every update is
  counted and none is lost;
- 8 processes race `Ledger.claim` on the same pending keys, round after round
  (each round's lease has expired by the next): exactly one fence per key per
  lease.
"""

from __future__ import annotations

import multiprocessing
import queue
import traceback
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest

from ledger_cli import errors
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.store import Store
from tests.sql_support import fresh_schema

WORKERS = 8
T0 = Instant.parse("2024-01-01T00:00:00Z")
LEASE = timedelta(minutes=5)
JOIN_TIMEOUT = 120.0

Spec = tuple[str, str]


def open_spec(spec: Spec) -> Store:
    kind, where = spec
    if kind == "sqlite":
        from ledger_cli.stores.sql.sqlite import SQLiteStore

        return SQLiteStore(where)
    from ledger_cli.stores.sql.postgres import PostgresStore

    return PostgresStore(where)


@pytest.fixture(params=["sqlite", "postgresql"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Spec]:
    if request.param == "sqlite":
        yield ("sqlite", str(tmp_path / "shared.db"))  # on disk: real fsyncs, real locks
    else:
        with fresh_schema("ledger_mp") as info:
            yield ("postgresql", info)


# -- workers (module level: spawned processes import them) --------------------------


def _run(target: Any, results: Any, worker: int, *args: Any) -> None:
    try:
        results.put((worker, "ok", target(worker, *args)))
    except BaseException:
        results.put((worker, "error", traceback.format_exc()))
        raise


def cas_worker(
    worker: int, spec: Spec, keys: list[str], increments: int, barrier: Barrier
) -> dict[str, Any]:
    store = open_spec(spec)
    written: list[tuple[str, int]] = []
    lost_races = 0
    barrier.wait()
    for n in range(increments):
        key = keys[(worker + n) % len(keys)]
        while True:
            cur = store.load(key)
            assert cur is not None
            value = cur.sequence + 1
            nxt = cur.replace(sequence=value, owner=f"w{worker}", task={"by": worker, "n": value})
            if store.compare_and_swap(key, cur, nxt):
                written.append((key, value))
                break
            lost_races += 1
    store.close()
    return {"written": written, "lost_races": lost_races}


def claim_worker(
    worker: int, spec: Spec, keys: list[str], rounds: int, barrier: Barrier
) -> dict[str, Any]:
    store = open_spec(spec)
    ledger = Ledger(store)
    me = f"w{worker}"
    order = keys[worker % len(keys) :] + keys[: worker % len(keys)]
    wins: list[tuple[int, str, int]] = []
    refused = 0
    for r in range(rounds):
        now = T0 + r * (LEASE + timedelta(seconds=1))  # every earlier lease has expired
        barrier.wait()
        for key in order:
            try:
                wins.append((r, key, ledger.claim(me, key, me, LEASE, now)))
            except errors.LeaseActiveError:
                refused += 1
        barrier.wait()  # the round is over for everyone before the next starts
    store.close()
    return {"wins": wins, "refused": refused}


def run_workers(target: Any, spec: Spec, *args: Any) -> dict[int, dict[str, Any]]:
    # fork where there is one (Linux): a spawned child re-imports pytest and the
    # package (~0.8 s of CPU each, 32 children). Each child opens its own store.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx: Any = multiprocessing.get_context(method)
    barrier = ctx.Barrier(WORKERS, timeout=JOIN_TIMEOUT)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_run, args=(target, results, w, spec, *args, barrier), daemon=True)
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    out: dict[int, dict[str, Any]] = {}
    failures: list[str] = []
    try:
        for _ in procs:
            worker, status, payload = results.get(timeout=JOIN_TIMEOUT)
            if status == "ok":
                out[worker] = payload
            else:
                failures.append(f"worker {worker}:\n{payload}")
                barrier.abort()
    except queue.Empty:
        failures.append("timed out waiting for the workers")
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join()
    assert not failures, "\n".join(failures)
    return out


# -- tests ---------------------------------------------------------------------------------


def test_concurrent_cas_loses_no_update(spec: Spec) -> None:
    keys = ["hot-a", "hot-b", "hot-c"]
    increments = 40
    with open_spec(spec) as store:
        for key in keys:
            assert store.compare_and_swap(key, None, TaskState(key=key, status="pending"))

    results = run_workers(cas_worker, spec, keys, increments)

    written = [item for r in results.values() for item in r["written"]]
    assert len(written) == WORKERS * increments
    with open_spec(spec) as store:
        final = {rec.key: rec for rec in store.range()}
    per_key = Counter(key for key, _ in written)
    for key in keys:
        values = sorted(v for k, v in written if k == key)
        # Each successful CAS wrote a distinct next value; together they are 1..final.
        assert values == list(range(1, per_key[key] + 1)), key
        assert final[key].sequence == per_key[key] == final[key].rev
        assert final[key].task == {"by": int(final[key].owner[1:]), "n": per_key[key]}
    lost_races = sum(r["lost_races"] for r in results.values())
    print(
        f"{spec[0]}: {len(written)} CAS updates by {WORKERS} processes, "
        f"{lost_races} lost races retried, 0 lost updates"
    )


def test_claim_race_gives_one_fence_per_key_per_lease(spec: Spec) -> None:
    keys = [f"job-{i}" for i in range(6)]
    rounds = 3
    with open_spec(spec) as store:
        ledger = Ledger(store)
        for key in keys:
            assert ledger.admit("setup", key, 1, {"job": key}, T0)

    results = run_workers(claim_worker, spec, keys, rounds)

    wins = [(r, key, fence, w) for w, res in results.items() for r, key, fence in res["wins"]]
    by_lease = Counter((r, key) for r, key, _, _ in wins)
    assert by_lease == Counter({(r, key): 1 for r in range(rounds) for key in keys})
    assert sorted((r, key, fence) for r, key, fence, _ in wins) == sorted(
        (r, key, r + 1) for r in range(rounds) for key in keys
    )
    refused = sum(res["refused"] for res in results.values())
    assert refused == (WORKERS - 1) * rounds * len(keys)
    last_winner = {key: f"w{w}" for r, key, _, w in wins if r == rounds - 1}
    with open_spec(spec) as store:
        for rec in store.range():
            assert (rec.status, rec.fence, rec.owner) == ("claimed", rounds, last_winner[rec.key])
            assert rec.rev == rounds  # one write per lease, nothing else
    print(f"{spec[0]}: {len(wins)} claims won, {refused} refused, one fence per key per lease")


def _first_open(path: str, barrier: Barrier, results: Any) -> None:
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    barrier.wait()
    try:
        SQLiteStore(path).close()
        results.put(None)
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(f"{type(exc).__name__}: {exc}")


def test_concurrent_first_opens_of_a_new_sqlite_file_all_succeed(tmp_path: Path) -> None:
    """Eight workers starting at once on a file that does not exist yet: SQLite
    answers the losers of the switch to WAL with SQLITE_BUSY at once, without
    its busy handler; every opener must wait for the winner instead (before the
    fix about one round in ten failed with "database is locked")."""
    ctx: Any = multiprocessing.get_context("fork")
    failures: list[str] = []
    for r in range(12):
        path = str(tmp_path / f"r{r}.db")
        barrier = ctx.Barrier(8)
        results = ctx.Queue()
        procs = [ctx.Process(target=_first_open, args=(path, barrier, results)) for _ in range(8)]
        for p in procs:
            p.start()
        for _ in procs:
            got = results.get(timeout=60)
            if got is not None:
                failures.append(f"round {r}: {got}")
        for p in procs:
            p.join(timeout=60)
    assert failures == []
