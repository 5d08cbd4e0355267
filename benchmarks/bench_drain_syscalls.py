"""System calls of a drained task on the JSON store, this tree against a git
revision's, counted with strace(1).

    .venv/bin/python benchmarks/bench_drain_syscalls.py --against REV [--tasks N]

For each tree: N tasks (default 200) admitted to a fresh store, then one
`run --next --drain -- true` worker under `strace -o FILE` (the worker only,
not its commands). A wrapper marks each hold of the store lock with two
cheap system calls (getppid(2) as the lock is taken, geteuid(2) as it is
let go), so the count is split into the calls made under the lock, where
the drain's workers wait on one another, and those outside it (from the
first hold on: the interpreter's start-up is left out). Printed: per
drained task, the calls under the lock and outside it, the kinds under the
lock that changed, and this tree's counts as ratios of REV's. Counts do not
depend on the machine's speed; strace slows the worker, so no time is shown.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_drain import admit, tree_env  # noqa: E402
from benchmarks.bench_startup import extract  # noqa: E402

MARKED = """
import os, sys
from ledger_cli.stores.jsonfile import fairlock
take, give = fairlock.QueueLock.acquire, fairlock.QueueLock.release
def acquire(self, fd):
    got = take(self, fd)
    os.getppid()
    return got
def release(self):
    os.geteuid()
    return give(self)
fairlock.QueueLock.acquire, fairlock.QueueLock.release = acquire, release
from ledger_cli.cli.app import main
sys.argv = ["ledger", *sys.argv[1:]]
main()
"""

_CALL = re.compile(r"(\w+)\(")


def count(trace: Path) -> tuple[int, collections.Counter[str], collections.Counter[str]]:
    """(lock holds, calls under the lock by kind, calls outside it by kind),
    from the first hold on: the interpreter's start-up is left out."""
    holds, inside, outside = 0, collections.Counter[str](), collections.Counter[str]()
    held = False
    for line in trace.read_text(errors="replace").splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        name = m.group(1)
        if name == "getppid":
            held, holds = True, holds + 1
        elif name == "geteuid":
            held = False
        elif holds:
            (inside if held else outside)[name] += 1
    return holds, inside, outside


def drained(tree: Path, tmp: Path, tasks: int) -> tuple[int, collections.Counter[str], int]:
    """(holds, calls under the lock, calls outside it) of one worker's drain."""
    env = tree_env(tree)
    store = tmp / "store"
    admit(tree, str(store), tasks, env)
    trace = tmp / "trace"
    run = ["run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true"]
    worker = [sys.executable, "-c", MARKED, "--store", str(store), *run]
    got = subprocess.run(
        ["strace", "-o", str(trace), *worker],
        env=env,
        cwd=tree,  # `-c` puts the working directory first on sys.path
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if got.returncode not in (0, 7):
        raise SystemExit(f"bench_drain_syscalls: the worker exited {got.returncode}")
    holds, inside, outside = count(trace)
    return holds, inside, sum(outside.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", required=True)
    parser.add_argument("--tasks", type=int, default=200)
    opts = parser.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("bench_drain_syscalls: needs strace (apt-get install strace)")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT, opts.against: extract(opts.against, Path(tmp) / "against")}
        for name, tree in trees.items():
            place = Path(tmp) / name.replace(" ", "-")
            place.mkdir()
            results[name] = drained(tree, place, opts.tasks)
    n = opts.tasks
    print(f"bench_drain_syscalls: one worker draining {n:,} tasks of `true`, JSON store")
    print(f"{'':>12}  holds  under the lock, a task  outside it, a task")
    for name, (holds, inside, outside) in results.items():
        print(f"{name:>12}  {holds:5}  {sum(inside.values()) / n:22.1f}  {outside / n:18.1f}")
    this, old = results["this tree"], results[opts.against]
    kinds = sorted(set(this[1]) | set(old[1]), key=lambda k: -(old[1][k] + this[1][k]))
    changed = [k for k in kinds if round(this[1][k] / n, 1) != round(old[1][k] / n, 1)]
    print("under the lock, a task, by kind (where they differ):")
    for kind in changed:
        print(f"  {kind:>12}: {old[1][kind] / n:6.1f} -> {this[1][kind] / n:6.1f}")
    under = sum(this[1].values()) / max(1, sum(old[1].values()))
    print(f"this tree / {opts.against}: under the lock {under:.2f}, outside {this[2] / old[2]:.2f}")


if __name__ == "__main__":
    main()
