"""Start-up cost of the hot commands against the bare interpreter.

    .venv/bin/python benchmarks/bench_startup.py [--rounds N] [--records N]

Builds a JSON store holding 10,000 records, then runs, interleaved round by
round (so load on the machine hits all three alike):

    python -c pass                              (the same interpreter)
    ledger --store S admit bench-N              (a new key each round)
    ledger --store S claim bench-N --owner bench --lease 5m

and prints each one's median wall time and its ratio to `python -c pass`.
With `--breakdown` it also times, in the same rounds, what the start-up is
made of: importing the engine, importing filelock, and `ledger admit` on the
in-process `memory:` store (no lock, no disk).
The issue's target is a ratio of at most 6. PYTHONDONTWRITEBYTECODE is
removed from the children's environment (byte-code caches are part of a
normal installation's start-up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build_store(path: Path, records: int) -> None:
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger
    from ledger_cli.stores.jsonfile import JsonFileStore

    store = JsonFileStore(path)
    ledger = Ledger(store)
    now = Instant.now()
    with store.batch():
        for i in range(records):
            ledger.admit("bench", f"filler-{i:05d}", 1, {"i": i}, now)
    # Some history of work, so the store looks lived in.
    with store.batch():
        for i in range(0, records, 10):
            key = f"filler-{i:05d}"
            fence = ledger.claim("bench", key, "w", timedelta(minutes=5), now)
            ledger.complete("bench", key, "w", fence, "completed", now)
    store.close()


def ledger_command() -> list[str]:
    script = Path(sys.executable).with_name("ledger")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "ledger_cli"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--breakdown", action="store_true", help="time the parts too")
    opts = parser.parse_args()

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("LEDGER_DEBUG", None)
    env["PYTHONPATH"] = str(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    store = tmp / "store"
    try:
        t0 = time.perf_counter()
        build_store(store, opts.records)
        print(f"store: {opts.records} records in {store} ({time.perf_counter() - t0:.1f}s)")
        ledger = [*ledger_command(), "--store", str(store)]
        print(f"ledger: {' '.join(ledger_command())}; interpreter: {sys.executable}")
        python = [sys.executable, "-c", "pass"]
        # Warm-up: byte-code caches, the page cache.
        for i in range(3):
            timed(python, env)
            timed([*ledger, "admit", f"warm-{i}"], env)
            timed([*ledger, "claim", f"warm-{i}", "--owner", "bench", "--lease", "5m"], env)
        extra: dict[str, list[str]] = {}
        if opts.breakdown:
            extra = {
                "import engine": [sys.executable, "-c", "import ledger_cli.engine.ledger"],
                "import filelock": [sys.executable, "-c", "import filelock"],
                "admit memory:": [*ledger_command(), "--store", "memory:", "admit", "k"],
            }
        times: dict[str, list[float]] = {
            "python -c pass": [],
            "ledger admit": [],
            "ledger claim": [],
        }
        times.update({name: [] for name in extra})
        for i in range(opts.rounds):
            times["python -c pass"].append(timed(python, env))
            times["ledger admit"].append(timed([*ledger, "admit", f"bench-{i}"], env))
            times["ledger claim"].append(
                timed([*ledger, "claim", f"bench-{i}", "--owner", "bench", "--lease", "5m"], env)
            )
            for name, argv in extra.items():
                times[name].append(timed(argv, env))
        base = statistics.median(times["python -c pass"])
        print(f"{opts.rounds} interleaved rounds, medians:")
        for name, samples in times.items():
            med = statistics.median(samples)
            print(f"  {name:<16} {med * 1000:7.1f} ms   ratio {med / base:4.2f}x")
        worst = max(statistics.median(times[n]) for n in ("ledger admit", "ledger claim"))
        verdict = "within" if worst / base <= 6 else "OVER"
        print(f"worst ratio {worst / base:.2f}x: {verdict} the 6x target")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
