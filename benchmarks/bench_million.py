"""A million tasks: what a store costs at the size users reach.

    .venv/bin/python benchmarks/bench_million.py [--tasks 1000000] [--stores json,sqlite]
        [--claims 5] [--dir DIR]

For each store: `admit --batch` of N ready tasks (one process, stdin), then,
each command a fresh `ledger` process, against a store of 100 tasks side by
side and alternating: `claim --next` (median of --claims), `stats --json`
(median of 3) and the time to `list --jsonl`'s first row (median of 3); and
the disk the store takes per task (`du`). Printed as a table with the ratios
big/small; the target for `claim --next` is <= 1.5. Nothing is asserted.
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
from pathlib import Path


def ledger() -> list[str]:
    exe = Path(sys.executable).with_name("ledger")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ledger_cli"]


def url(kind: str, where: Path) -> str:
    return f"sqlite:{where}.db" if kind == "sqlite" else f"json:{where}"


def admit(store: str, n: int) -> float:
    """Seconds to admit n ready tasks in one `admit --batch -`, fed as generated."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*ledger(), "--store", store, "admit", "--batch", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    block = 10_000
    for at in range(0, n, block):
        lines = "".join(f'{{"key":"k{i:07d}"}}\n' for i in range(at, min(n, at + block)))
        proc.stdin.write(lines.encode())
    proc.stdin.close()
    if proc.wait() != 0:
        raise SystemExit(f"bench_million: admit --batch failed on {store}")
    return time.perf_counter() - start


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def first_row(store: str) -> float:
    """Seconds until `list --jsonl` prints its first line."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*ledger(), "--store", store, "list", "--jsonl"], stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    took = time.perf_counter() - start
    proc.kill()
    proc.wait()
    return took


def disk_bytes(path: Path) -> int:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * 1024


def measure(kind: str, n: int, claims: int, base: Path) -> dict[str, float]:
    big, small = base / f"{kind}-big", base / f"{kind}-small"
    got: dict[str, float] = {"admit_s": admit(url(kind, big), n)}
    admit(url(kind, small), 100)
    got["admit_per_s"] = n / got["admit_s"]
    where = big if kind == "json" else Path(f"{big}.db")
    got["bytes_per_task"] = disk_bytes(where) / n
    pairs: dict[str, tuple[list[float], list[float]]] = {
        "claim": ([], []),
        "stats": ([], []),
        "first_row": ([], []),
    }
    for i in range(claims):
        for store, side in ((url(kind, big), 0), (url(kind, small), 1)):
            claim = [*ledger(), "--store", store, "claim", "--next", "--owner", f"w{i}"]
            pairs["claim"][side].append(timed([*claim, "--lease", "1h"]))
            if i < 3:
                stats = [*ledger(), "--store", store, "--json", "stats"]
                pairs["stats"][side].append(timed(stats))
                pairs["first_row"][side].append(first_row(store))
    for name, (b, s) in pairs.items():
        got[f"{name}_big_s"] = statistics.median(b)
        got[f"{name}_ratio"] = statistics.median(b) / statistics.median(s)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--stores", default="json,sqlite")
    ap.add_argument("--claims", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench_million-", dir=args.dir))
    try:
        rows = {
            kind: measure(kind, args.tasks, args.claims, base) for kind in args.stores.split(",")
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load = os.getloadavg()[0]
    print(f"bench_million: {args.tasks:,} ready tasks against 100; load average {load:.1f}")
    print(
        f"{'store':8} {'admit --batch':>14} {'tasks/s':>9} {'bytes/task':>11} "
        f"{'claim (s)':>10} {'ratio':>6} {'stats (s)':>10} {'ratio':>6} "
        f"{'1st row (s)':>12} {'ratio':>6}"
    )
    for kind, r in rows.items():
        print(
            f"{kind:8} {r['admit_s']:>13.1f}s {r['admit_per_s']:>9,.0f} "
            f"{r['bytes_per_task']:>11,.0f} {r['claim_big_s']:>10.3f} {r['claim_ratio']:>6.2f} "
            f"{r['stats_big_s']:>10.3f} {r['stats_ratio']:>6.2f} "
            f"{r['first_row_big_s']:>12.3f} {r['first_row_ratio']:>6.2f}"
        )


if __name__ == "__main__":
    main()
