"""`retry` and `cancel` cost with the size of the store: 100 vs 100,000
unrelated finished records, the dependents walk through the store's hook vs
the old whole-store Range, side by side in one run.

    .venv/bin/python benchmarks/bench_retry.py [--quick] [--records N] [--reps R]
        [--dir DIR] [--postgres-url URL] [--stores json,sqlite,postgresql,memory]

Each store holds a failed root `r` with a chain of 10 blocked dependents, plus
BASE=100 (small) or N (big; default 100,000, `--quick` 10,000) completed
records that need nothing of it. One cycle is `retry r` (un-blocks the 10)
then `cancel r` (blocks them again); the median of R cycles (default 5) is
timed in-process through the library on the same store twice:

- `hook`: the engine as shipped (`dependents(keys)`: SQL stores read the
  trigger-kept `ledger_needs` table, MemStore a reverse map, the JSON store
  its deps/ index: jsonfile/depsindex.py);
- `range`: the same store seen without the hook, so the walk reads every
  record (the code before the hooks).

Printed: milliseconds per cycle and the big/small ratio of each (flat is the
goal: the hook's cost follows the dependents, not the store). Then the
command line as a user runs it (a fresh process each time, bytecode caching
allowed): `ledger retry r` and `ledger cancel r` medians on both sizes.
Last, what the PostgreSQL lock of engine/serial.py costs: WRITERS processes
each admitting --admits keys that need one pending task (a DAG submitted
ahead of its work: such an admission may block, so it takes the lock; with
every need completed it takes none), one batch (transaction) per admit as
`ledger admit` does, with the lock and without it (admits/s, side by side).
PostgreSQL is the server at --postgres-url (default the local test server),
in fresh schemas dropped afterwards; skipped with the reason when unreachable.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_queue import DEFAULT_PG, env, pg_problem, places  # noqa: E402

from ledger_cli.engine.instant import Instant  # noqa: E402
from ledger_cli.engine.ledger import Ledger  # noqa: E402
from ledger_cli.engine.record import TaskState  # noqa: E402
from ledger_cli.engine.store import Store  # noqa: E402
from ledger_cli.stores import open_store  # noqa: E402

T0 = Instant.parse("2026-01-01T00:00:00Z")
BASE = 100
CHAIN = 10
CHUNK = 10_000


class WithoutHook:
    """The store without its `dependents` hook: the engine falls back to Range."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "dependents":
            raise AttributeError(name)
        return getattr(self._inner, name)


def build(store: Store, unrelated: int) -> None:
    """`unrelated` completed records, then root r failed with CHAIN blocked behind it."""
    for at in range(0, unrelated, CHUNK):
        with store.batch():
            for i in range(at, min(at + CHUNK, unrelated)):
                rec = TaskState(
                    key=f"done{i:06d}",
                    status="completed",
                    sequence=1,
                    fence=1,
                    task={"i": i},
                    created_by="bench",
                    created_at=T0,
                    updated_by="bench",
                    updated_at=T0,
                )
                store.compare_and_swap(rec.key, None, rec)
    led = Ledger(store)
    with store.batch():
        led.admit("bench", "r", 1, None, T0)
        prev = "r"
        for i in range(CHAIN):
            led.admit("bench", f"r{i:02d}", 1, None, T0, prev)
            prev = f"r{i:02d}"
        led.cancel("bench", "r", T0)


def cycle_ms(store: Any, reps: int) -> float:
    led = Ledger(store)
    times = []
    gc.collect()
    for _ in range(reps):
        t = time.perf_counter()
        with store.batch():
            freed = led.retry("bench", "r", T0)
        with store.batch():
            blocked = led.cancel("bench", "r", T0)
        times.append(time.perf_counter() - t)
        if len(freed) != CHAIN or len(blocked) != CHAIN:
            raise SystemExit(f"retry freed {len(freed)}, cancel blocked {len(blocked)}")
    return statistics.median(times) * 1000


def cli_ms(url: str, reps: int) -> tuple[float, float]:
    def run(*args: str) -> float:
        t = time.perf_counter()
        res = subprocess.run(
            [sys.executable, "-m", "ledger_cli", "--store", url, *args],
            capture_output=True,
            text=True,
            env=env(),
            check=False,
        )
        if res.returncode != 0:
            raise SystemExit(f"ledger {' '.join(args)}: {res.returncode} {res.stderr}")
        return time.perf_counter() - t

    retries, cancels = [], []
    for _ in range(reps):
        retries.append(run("retry", "r"))
        cancels.append(run("cancel", "r"))
    return statistics.median(retries) * 1000, statistics.median(cancels) * 1000


def bench_kind(kind: str, n: int, reps: int, base: Path, pg: str) -> list[str]:
    rows: list[str] = []
    say: Callable[[str], None] = lambda what: print(  # noqa: E731
        f"  [{kind}] {what}", file=sys.stderr, flush=True
    )
    with places(kind, base, pg) as place:
        result: dict[tuple[str, str], float] = {}
        cli: dict[str, tuple[float, float]] = {}
        for size, count in (("small", BASE), ("big", n)):
            url = "memory:" if kind == "memory" else place(f"{kind}_{size}")
            say(f"building {size}: {count:,} finished records")
            store = open_store(url)
            try:
                build(store, count)
                result[("hook", size)] = cycle_ms(store, reps)
                result[("range", size)] = cycle_ms(WithoutHook(store), reps)
            finally:
                store.close()
            if kind != "memory":
                cli[size] = cli_ms(url, reps)
        for path in ("hook", "range"):
            small, big = result[(path, "small")], result[(path, "big")]
            rows.append(
                f"{kind:<10} {path:<6} retry+cancel {small:9.2f} ms @{BASE}  "
                f"{big:9.2f} ms @{n:,}  ratio {big / small:7.2f}"
            )
        if cli:
            (rs, cs), (rb, cb) = cli["small"], cli["big"]
            rows.append(
                f"{kind:<10} CLI    `ledger retry` {rs:7.1f} -> {rb:7.1f} ms ({rb / rs:.2f}x), "
                f"`ledger cancel` {cs:7.1f} -> {cb:7.1f} ms ({cb / cs:.2f}x)"
            )
    return rows


WRITERS = 4


class NoLock:
    """A PostgresStore without `lock_blocks` (the engine then takes no lock)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "lock_blocks":
            raise AttributeError(name)
        return getattr(self._inner, name)


def admit_writer(url: str, n: int, me: int, locked: bool, go: Any) -> None:
    store = open_store(url)
    led = Ledger(store if locked else NoLock(store))  # type: ignore[arg-type]
    go.wait()
    for i in range(n):
        with store.batch():
            led.admit("bench", f"w{me}-{locked}-{i:05d}", 1, None, T0, "root")
    store.close()


def admits_per_s(url: str, n: int, locked: bool) -> float:
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    go = ctx.Barrier(WRITERS + 1)
    procs = [
        ctx.Process(target=admit_writer, args=(url, n, me, locked, go)) for me in range(WRITERS)
    ]
    for p in procs:
        p.start()
    go.wait()
    t = time.perf_counter()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"an admit writer failed ({p.exitcode})")
    return WRITERS * n / (time.perf_counter() - t)


def bench_lock(n: int, base: Path, pg: str) -> str:
    with places("postgresql", base, pg) as place:
        url = place("lock")
        store = open_store(url)
        Ledger(store).admit("bench", "root", 1, None, T0)
        store.close()
        off = admits_per_s(url, n, locked=False)
        on = admits_per_s(url, n, locked=True)
    return (
        f"postgresql admits with a need, {WRITERS} processes: {on:7.0f}/s with the lock, "
        f"{off:7.0f}/s without ({on / off:.2f}x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--records", type=int)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir")
    ap.add_argument(
        "--postgres-url", default=os.environ.get("LEDGER_TEST_POSTGRES_URL", DEFAULT_PG)
    )
    ap.add_argument("--stores", default="json,sqlite,postgresql,memory")
    ap.add_argument("--admits", type=int, default=500, help="per writer (the lock's cost)")
    args = ap.parse_args()
    n = args.records or (10_000 if args.quick else 100_000)
    rows: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for kind in args.stores.split(","):
            if kind == "postgresql" and (why := pg_problem(args.postgres_url)):
                rows.append(f"{kind:<10} skipped: {why}")
                continue
            rows += bench_kind(kind, n, args.reps, Path(tmp), args.postgres_url)
            if kind == "postgresql" and args.admits > 0:
                rows.append(bench_lock(args.admits, Path(tmp), args.postgres_url))
    print(f"retry + cancel of a root with {CHAIN} dependents; median of {args.reps} cycles")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
