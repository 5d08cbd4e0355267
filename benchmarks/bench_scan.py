"""Whole-store scans on the JSON store against SQLite, side by side.

    .venv/bin/python benchmarks/bench_scan.py [--quick] [--tasks N] [--reps R] [--dir DIR]

Both stores hold the same N one-line pending tasks (default 100,000;
`--quick` 10,000), admitted in batches through the library. Timed, each as
a fresh `ledger` process (bytecode caching allowed), R times (default 3)
in turn — JSON, SQLite, JSON, SQLite… — so that the load of a shared
machine falls on both: `list --jsonl`, `snapshot` and `doctor`, output to
/dev/null. Printed: the median seconds of each and JSON / SQLite. Also the
disk each store takes (`du`-style: allocated blocks) and the JSON store's
inodes, per record.

The JSON store decodes the records it wrote itself with the C json scanner
(engine/fastwire.py: the record's checksum proves it canonical); SQLite
reads rows. Both print through the same wire encoder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_queue import admit_many, env  # noqa: E402

COMMANDS: tuple[tuple[str, ...], ...] = (("list", "--jsonl"), ("snapshot",), ("doctor",))


def timed(url: str, *args: str) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "ledger_cli", "--store", url, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env(),
        check=False,
    )
    took = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"ledger {' '.join(args)} on {url}: exit {res.returncode}: {res.stderr!r}")
    return took


def disk(path: Path) -> tuple[int, int]:
    """(allocated bytes, inodes) under path (a file or a directory tree)."""
    if path.is_file():
        return path.stat().st_blocks * 512, 1
    total, inodes = path.stat().st_blocks * 512, 1
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_blocks * 512
            inodes += 1
    return total, inodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10,000 tasks")
    ap.add_argument("--tasks", type=int, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    opts = ap.parse_args()
    n = opts.tasks or (10_000 if opts.quick else 100_000)
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        base = Path(tmp)
        json_path, sqlite_path = base / "json", base / "store.db"
        urls = {"json": f"json:{json_path}", "sqlite": f"sqlite:{sqlite_path}"}
        keys = [f"task-{i:07d}" for i in range(n)]
        for kind, url in urls.items():
            t0 = time.perf_counter()
            admit_many(url, keys)
            print(f"{kind}: {n:,} tasks admitted in {time.perf_counter() - t0:.1f} s", flush=True)
        print(f"\n{n:,} tasks, median of {opts.reps} (seconds, each a fresh process)")
        print(f"{'command':<16} {'JSON':>8} {'SQLite':>8} {'JSON/SQLite':>12}")
        for args in COMMANDS:
            times: dict[str, list[float]] = {"json": [], "sqlite": []}
            for _ in range(opts.reps):
                for kind, url in urls.items():
                    times[kind].append(timed(url, *args))
            j, s = statistics.median(times["json"]), statistics.median(times["sqlite"])
            print(f"{' '.join(args):<16} {j:8.2f} {s:8.2f} {j / s:11.2f}x", flush=True)
        jb, ji = disk(json_path)
        sb, _ = disk(sqlite_path)
        print(
            f"\ndisk: JSON {jb / 1e6:.1f} MB "
            f"({jb / n:,.0f} bytes and {ji / n:.2f} inodes a record), "
            f"SQLite {sb / 1e6:.1f} MB ({sb / n:,.0f} bytes a record)"
        )


if __name__ == "__main__":
    main()
