"""JsonFileStore benchmarks, side by side in one run:

1. cost independent of history: admit+claim+complete of a fresh key on a store of
   100 records and on one of 100,000 (interleaved, medians; target ratio <= 1.3);
2. group commit: 10,000 `Ledger.admit` inside one `batch()`, durable on return
   (target >= 5,000 tasks/s);
3. lock fairness: the wait for the store lock with 8 processes hammering
   compare-and-swap on one key (p50/p99/max), with the FIFO queue (the store's
   setting) and with bare filelock polling (50 ms default, 1 ms) for comparison;
4. the start-up cost of `import filelock`.

Run: .venv/bin/python benchmarks/bench_jsonfile.py [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import JsonFileStore, fairlock

T0 = Instant.parse("2024-01-01T00:00:00Z")
LEASE = timedelta(minutes=5)


def _bench_base() -> str:
    """$LEDGER_BENCH_DIR, else beside where the default store lives (the user's data
    directory: a real disk; a tmpfs would make every fsync free)."""
    base = os.environ.get("LEDGER_BENCH_DIR")
    if not base:
        import platformdirs

        base = str(platformdirs.user_cache_path("ledger_cli") / "bench")
    os.makedirs(base, exist_ok=True)
    return base


_MADE: list[str] = []


def _bench_dir() -> str:
    """A fresh store directory. Stores are deleted only when the run ends: deleting
    100,000 files (on a disk mounted with `discard`) slows the file creation of
    whatever is measured next for many seconds, and os.sync() does not wait for it."""
    os.sync()  # start each measurement with no write-back left from the previous one
    path = tempfile.mkdtemp(prefix="ledger-bench-", dir=_bench_base())
    _MADE.append(path)
    return path


# -- 1. cost independent of history ---------------------------------------------------------


def build(root: str, n: int) -> None:
    """n records: 90% completed (accumulated history), 10% pending, written in batches."""
    store = JsonFileStore(root)
    i = 0
    while i < n:
        with store.batch():
            for j in range(i, min(i + 10_000, n)):
                key = f"old/{j:07d}"
                status = "pending" if j % 10 == 0 else "completed"
                rec = TaskState(
                    key=key,
                    status=status,
                    sequence=1,
                    fence=0 if status == "pending" else 1,
                    task={"cmd": f"job {j}", "args": [j, "x" * 40]},
                    created_by="bench",
                    created_at=T0,
                    updated_by="bench",
                    updated_at=T0,
                )
                assert store.compare_and_swap(key, None, rec)
        i += 10_000


def one_op(ledger: Ledger, key: str) -> float:
    """admit + claim + complete of a fresh key: three durable writes."""
    t = time.perf_counter()
    assert ledger.admit("bench", key, 1, {"cmd": "true"}, T0)
    fence = ledger.claim("bench", key, "worker", LEASE, T0)
    ledger.complete("bench", key, "worker", fence, "completed", T0)
    return time.perf_counter() - t


def bench_history_independence(rounds: int, big: int) -> None:
    print(f"== 1. one key's admit+claim+complete: store of 100 vs {big:,} records")
    small_dir, big_dir = _bench_dir(), _bench_dir()
    t = time.perf_counter()
    build(small_dir, 100)
    build(big_dir, big)
    print(f"   built both stores in {time.perf_counter() - t:.1f}s (90% completed records)")
    ledgers = {"small": Ledger(JsonFileStore(small_dir)), "big": Ledger(JsonFileStore(big_dir))}
    times: dict[str, list[float]] = {"small": [], "big": []}
    for ledger in ledgers.values():  # warm up both
        for i in range(20):
            one_op(ledger, f"warm/{i}")
    for r in range(rounds):
        order = ["small", "big"] if r % 2 == 0 else ["big", "small"]
        for name in order:
            times[name].append(one_op(ledgers[name], f"new/{r:06d}"))
    med = {name: statistics.median(v) for name, v in times.items()}
    for name in ("small", "big"):
        size = 100 if name == "small" else big
        print(
            f"   {size:>9,} records: median {med[name] * 1e3:6.2f} ms/op "
            f"(p90 {sorted(times[name])[int(len(times[name]) * 0.9)] * 1e3:6.2f} ms)"
        )
    ratio = med["big"] / med["small"]
    verdict = "OK" if ratio <= 1.3 else "ABOVE TARGET"
    print(f"   ratio big/small = {ratio:.2f}   (target <= 1.3: {verdict}; {rounds} rounds)")


# -- 2. group commit ----------------------------------------------------------------------------


def bench_group_commit(n: int, repeats: int) -> None:
    print(f"== 2. {n:,} Ledger.admit inside one batch(), durable on return")
    rates = []
    for _ in range(repeats):
        root = _bench_dir()
        store = JsonFileStore(root)
        ledger = Ledger(store)
        t = time.perf_counter()
        with store.batch():
            for i in range(n):
                assert ledger.admit("bench", f"batch/{i:06d}", 1, {"i": i}, T0)
        elapsed = time.perf_counter() - t
        assert sum(1 for _ in JsonFileStore(root).range()) == n
        rates.append(n / elapsed)
        print(f"   {elapsed:.2f}s  -> {n / elapsed:,.0f} tasks/s")
    best, med = max(rates), statistics.median(rates)
    verdict = "OK" if med >= 5000 else "BELOW TARGET"
    print(f"   median {med:,.0f} tasks/s, best {best:,.0f}   (target >= 5,000/s: {verdict})")


# -- 3. lock fairness ------------------------------------------------------------------------------


def _contender(root: str, seconds: float, fair: bool, poll: float, out: Any, go: Any) -> None:
    fairlock.FILELOCK_POLL = poll
    store = JsonFileStore(root, fair_lock=fair)
    lock = store._lock  # measure exactly the wait for the store lock
    waits: list[float] = []
    real_acquire = lock.acquire

    def timed_acquire(root_fd: int) -> None:
        t = time.perf_counter()
        real_acquire(root_fd)
        waits.append(time.perf_counter() - t)

    lock.acquire = timed_acquire  # type: ignore[method-assign]
    go.wait()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        cur = store.load("hot")
        assert cur is not None
        store.compare_and_swap("hot", cur, cur.replace(sequence=cur.sequence + 1))
    out.put(waits)


def bench_lock_wait(procs: int, seconds: float) -> None:
    print(f"== 3. store-lock wait, {procs} processes looping compare-and-swap on one key")
    ctx = multiprocessing.get_context("fork")
    setups = [
        ("FIFO queue + filelock (the store)", True, fairlock.FILELOCK_POLL),
        ("bare filelock, default 50 ms poll", False, 0.05),
        ("bare filelock, 1 ms poll", False, 0.001),
    ]
    for label, fair, poll in setups:
        root = _bench_dir()
        store = JsonFileStore(root)
        assert store.compare_and_swap(
            "hot",
            None,
            TaskState(
                key="hot",
                status="pending",
                created_by="b",
                created_at=T0,
                updated_by="b",
                updated_at=T0,
            ),
        )
        out, go = ctx.Queue(), ctx.Event()
        workers = [
            ctx.Process(target=_contender, args=(root, seconds, fair, poll, out, go))
            for _ in range(procs)
        ]
        for w in workers:
            w.start()
        time.sleep(0.3)
        go.set()
        per_proc = [out.get(timeout=seconds + 120) for _ in workers]
        for w in workers:
            w.join()
        waits = sorted(x for ws in per_proc for x in ws)
        counts = sorted(len(ws) for ws in per_proc)
        p50, p99 = (waits[min(int(len(waits) * q), len(waits) - 1)] * 1e3 for q in (0.5, 0.99))
        print(
            f"   {label:<36} p50 {p50:6.1f} ms  p99 {p99:7.1f} ms  "
            f"max {waits[-1] * 1e3:7.1f} ms  {len(waits) / seconds:5.0f} ops/s  "
            f"ops per process {counts[0]}..{counts[-1]}"
        )


# -- 4. import cost ----------------------------------------------------------------------------


def bench_import(runs: int) -> None:
    print("== 4. start-up: `import filelock` over a bare interpreter (median of wall times)")

    def wall(code: str) -> float:
        samples = []
        for _ in range(runs):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            samples.append(time.perf_counter() - t)
        return statistics.median(samples)

    import filelock

    base = wall("pass")
    with_fl = wall("import filelock")
    engine = wall("import ledger_cli.engine.ledger, ledger_cli.stores.jsonfile")
    print(f"   interpreter alone            {base * 1e3:6.1f} ms")
    print(f"   + import filelock {filelock.__version__:<10} +{(with_fl - base) * 1e3:5.1f} ms")
    print(f"   + engine and JsonFileStore   +{(engine - base) * 1e3:5.1f} ms (filelock not loaded)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    random.seed(1)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, stores under {_bench_base()}")
    if args.quick:
        bench_history_independence(rounds=30, big=10_000)
        bench_group_commit(2_000, repeats=1)
        bench_lock_wait(8, seconds=2.0)
        bench_import(runs=5)
    else:
        bench_history_independence(rounds=200, big=100_000)
        bench_group_commit(10_000, repeats=3)
        bench_lock_wait(8, seconds=5.0)
        bench_import(runs=15)
    t = time.perf_counter()
    for path in _MADE:
        shutil.rmtree(path, ignore_errors=True)
    print(f"(removed the benchmark stores in {time.perf_counter() - t:.1f}s)")


if __name__ == "__main__":
    main()
