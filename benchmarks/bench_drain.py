"""`ledger run --next --drain` of this tree against a git revision's, side by side.

    .venv/bin/python benchmarks/bench_drain.py --against REV [--tasks N]
        [--workers W] [--rounds R] [--store json|sqlite]

Each round admits N tasks (default 1,000) to a fresh store and drains them
with W `run --next --drain -- true` workers (default 4), once with this
tree and once with the tree of git revision REV (extracted with `git
archive`), in turn, the first of the two alternating by round, R rounds
(default 3). Printed for each: the median wall time of the drain, the
median CPU time of the workers and their commands (user + system, from
getrusage(RUSAGE_CHILDREN)), tasks/s, and this tree's figures as ratios of
REV's (below 1.00: less time). Bytecode is cached, as users run it.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_startup import extract  # noqa: E402


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that runs `tree`'s ledger_cli. `python -m` puts the
    working directory first on sys.path, ahead of PYTHONPATH, so every
    process of a tree also runs in that tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(tree)
    return env


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def admit(tree: Path, store: str, tasks: int, env: dict[str, str]) -> list[str]:
    """`admit --batch` of N tasks (t0, t1, …) into `store` by `tree`'s ledger;
    the command that runs that ledger on `store`."""
    ledger = [sys.executable, "-m", "ledger_cli", "--store", store]
    batch = "".join(f'{{"key":"t{i}"}}\n' for i in range(tasks))
    subprocess.run(
        [*ledger, "admit", "--batch", "-"],
        input=batch,
        text=True,
        env=env,
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return ledger


def drain(tree: Path, store: str, tasks: int, workers: int) -> tuple[float, float]:
    """(wall, CPU) seconds of W drain workers over N fresh tasks in `store`."""
    env = tree_env(tree)
    ledger = admit(tree, store, tasks, env)
    run = ["run", "--next", "--drain", "--lease", "1m"]
    cpu, start = _cpu(), time.perf_counter()
    procs = [
        subprocess.Popen(
            [*ledger, *run, "--owner", f"w{w}", "--", "true"],
            env=env,
            cwd=tree,
            stdout=subprocess.DEVNULL,
        )
        for w in range(workers)
    ]
    for proc in procs:
        if proc.wait() not in (0, 7):  # 7: a worker that found nothing left
            raise SystemExit(f"bench_drain: a worker exited {proc.returncode}")
    wall = time.perf_counter() - start
    return wall, _cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", required=True)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--store", choices=["json", "sqlite"], default="json")
    opts = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"this tree": [], opts.against: []}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT, opts.against: extract(opts.against, Path(tmp) / "against")}
        for r in range(opts.rounds):
            # Each round's first drain ran ~6% slower even between two copies of
            # one tree: the order alternates, so neither side always goes first.
            order = list(trees.items()) if r % 2 == 0 else list(reversed(trees.items()))
            for name, tree in order:
                place = Path(tmp) / f"{r}-{len(results[name])}-{name.replace(' ', '-')}"
                store = str(place) if opts.store == "json" else f"sqlite:///{place}.db"
                results[name].append(drain(tree, store, opts.tasks, opts.workers))
                print(f"  round {r + 1}/{opts.rounds}: {name}", file=sys.stderr)
    medians = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in results.items()
    }
    print(
        f"bench_drain: {opts.tasks:,} tasks, {opts.workers} workers, {opts.store} store; "
        f"medians of {opts.rounds} interleaved rounds"
    )
    for name, (wall, cpu) in medians.items():
        print(f"{name:>12}: wall {wall:6.2f} s, CPU {cpu:6.2f} s, {opts.tasks / wall:6.0f} tasks/s")
    (wall, cpu), (old_wall, old_cpu) = medians["this tree"], medians[opts.against]
    print(f"this tree / {opts.against}: wall {wall / old_wall:.2f}, CPU {cpu / old_cpu:.2f}")


if __name__ == "__main__":
    main()
