"""`ledger serve`: the time of a task-table page at N tasks, on each store.

    .venv/bin/python benchmarks/bench_serve.py [--tasks N] [--rounds R] [--kinds K,K]

Admits N tasks (`ledger admit --batch`, keys `task-000000`…) into a fresh
store of each kind (--kinds, default json,sqlite,postgresql), fails one,
starts `ledger serve --bind 127.0.0.1:0` on it, and times, over R rounds each,
GET of the first page of `/tasks` (HTML, 100 rows; the counts come after,
from app.js) and of `/api/tasks`, the page after the middle key (`after=`),
a status filter that matches one task (`status=failed`: the JSON store reads
every record, the SQL stores filter in the database), and a task's page (its
record, attempts and history lines). Prints the median and the worst, in
milliseconds. PostgreSQL runs on the test server (tests/sql_support.py) in a
fresh schema.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.cli_support import run_ledger
from tests.stores import KINDS
from tests.web_support import served


def fill(store: str, n: int) -> None:
    lines = "".join(json.dumps({"key": f"task-{i:06}"}) + "\n" for i in range(n))
    done = run_ledger(store, "admit", "--batch", "-", input=lines.encode(), timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"admit --batch failed: {done.stderr}")
    done = run_ledger(store, "run", f"task-{n // 3:06}", "--owner", "w", "--lease", "1m",
                      "--", "false", timeout=600)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--kinds", default="json,sqlite,postgresql")
    args = ap.parse_args()
    n = args.tasks
    paths = {
        "first page /tasks": "/tasks",
        "first page /api/tasks": "/api/tasks",
        "middle page /api/tasks?after=": f"/api/tasks?after=task-{n // 2:06}",
        "status=failed": "/api/tasks?status=failed",
        "a task page /tasks/KEY": f"/tasks/task-{n // 2:06}",
    }
    print(f"{n:,} tasks, {args.rounds} rounds; median / worst in ms")
    for kind in args.kinds.split(","):
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            store = stack.enter_context(KINDS[kind].place(Path(tmp)))
            t0 = time.perf_counter()
            fill(str(store), n)
            print(f"{kind}: filled in {time.perf_counter() - t0:.1f} s")
            web = stack.enter_context(served(store))
            for name, path in paths.items():
                times = []
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    reply = web.get(path)
                    times.append((time.perf_counter() - t) * 1000)
                    assert reply.status == 200, (path, reply.status)
                med, worst = statistics.median(times), max(times)
                print(f"  {kind:<10} {name:<32} {med:9.1f} / {worst:9.1f}")


if __name__ == "__main__":
    main()
