"""How a drained task's files go in place on the JSON store: rename(2) over the
target against renameat2(RENAME_EXCHANGE) and an unlink (stores/jsonfile/swap.py).

    .venv/bin/python benchmarks/bench_swap.py [--tasks N] [--workers W] [--rounds R]

Each round admits N tasks (default 300) to a fresh store and drains them with W
`ledger run --next --drain -- true` workers (default 1), once with the files put
in place by rename(2) (`swap.EXCHANGE_AFTER` set past the run) and once as
shipped (the exchange from a process's ninth unsynced file), in turn, R rounds
(default 5). Printed: the median wall time of each, and exchange / rename.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORKER = """
import runpy, sys
from ledger_cli.stores.jsonfile import swap
swap.EXCHANGE_AFTER = int(sys.argv[1])
sys.argv = ["ledger", *sys.argv[2:]]
runpy.run_module("ledger_cli", run_name="__main__")
"""
MODES = {"rename": 10**12, "exchange": None}


def drain(tasks: int, workers: int, exchange_after: int | None) -> float:
    from ledger_cli.stores.jsonfile import swap

    after = swap.EXCHANGE_AFTER if exchange_after is None else exchange_after
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        batch = "".join(f'{{"key":"t{i}"}}\n' for i in range(tasks))
        ledger = [sys.executable, "-m", "ledger_cli", "--store", str(store)]
        subprocess.run(
            [*ledger, "admit", "--batch", "-"],
            input=batch,
            text=True,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        start = time.perf_counter()
        run = ["run", "--next", "--drain", "--lease", "1m"]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _WORKER,
                    str(after),
                    "--store",
                    str(store),
                    *run,
                    "--owner",
                    f"w{n}",
                    "--",
                    "true",
                ],
                stdout=subprocess.DEVNULL,
            )
            for n in range(workers)
        ]
        for p in procs:
            p.wait()
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode, after in MODES.items():
            times[mode].append(drain(args.tasks, args.workers, after))
            print(f"  round {r + 1}/{args.rounds}: {mode} {times[mode][-1]:.2f} s", file=sys.stderr)
    med = {m: statistics.median(t) for m, t in times.items()}
    print(f"bench_swap: {args.tasks} tasks, {args.workers} --drain workers, {args.rounds} rounds")
    for mode in MODES:
        print(f"  {mode:<9} {med[mode]:6.2f} s  ({args.tasks / med[mode]:.0f} tasks/s)")
    print(f"  exchange / rename: {med['exchange'] / med['rename']:.2f}x")


if __name__ == "__main__":
    main()
