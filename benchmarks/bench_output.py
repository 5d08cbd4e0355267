"""What keeping the output of runs costs (docs/design.md §7.2), each figure side by side.

    .venv/bin/python benchmarks/bench_output.py [--size-mib 1024] [--tasks 2000]
        [--wait-keys 10000] [--store json|sqlite] [--rounds 3]
        [--only throughput|drain|wait]

1. Throughput of `ledger run K -- cat FILE` into a pipe against `cat FILE`
   into the same kind of pipe (the reader is `cat > /dev/null`), on a FILE of
   --size-mib MiB; rounds alternate the two, medians compared. Target >= 0.5x.
2. The peak RSS of `ledger run` while its command prints the same FILE
   (the default --keep-output of 1 MiB). Target <= keep-output + 32 MiB.
3. `run --next --drain` of --tasks short tasks (`true`) with the output kept
   (the default) against `--keep-output 0`, each on a fresh store; medians.
   Target <= 1.25x.
4. `ledger wait` on --wait-keys keys once all but 10 have settled: the store
   reads one poll makes (counted on the store object). Target: 10.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LEDGER = [sys.executable, "-m", "ledger_cli"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _store(tmp: Path, kind: str, name: str) -> str:
    return f"sqlite:{tmp / (name + '.db')}" if kind == "sqlite" else f"json:{tmp / name}"


def _ledger(store: str, *args: str, stdin: bytes | None = None) -> str:
    res = subprocess.run(
        [*LEDGER, "--store", store, *args], input=stdin, capture_output=True, env=_env(), check=True
    )
    return res.stdout.decode()


def _timed_shell(script: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["sh", "-c", script], check=True, env=_env())
    return time.perf_counter() - t0


def throughput(tmp: Path, kind: str, size_mib: int, rounds: int) -> None:
    big = tmp / "big"
    with open(big, "wb") as f:
        block = os.urandom(1 << 20)
        for _ in range(size_mib):
            f.write(block)
    ledger = " ".join(LEDGER)
    cat_t, run_t = [], []
    for r in range(rounds):
        store = _store(tmp, kind, f"tp{r}")
        _ledger(store, "admit", "big")
        cat_t.append(_timed_shell(f"cat {big} | cat > /dev/null"))
        run_t.append(
            _timed_shell(
                f"{ledger} --store {store} run big --owner b --lease 1m -- cat {big}"
                " | cat > /dev/null"
            )
        )
    c, k = statistics.median(cat_t), statistics.median(run_t)
    mib = size_mib
    print(
        f"1. throughput, {mib} MiB into a pipe: cat {mib / c:,.0f} MiB/s, "
        f"ledger run -- cat {mib / k:,.0f} MiB/s: {c / k:.2f}x (target >= 0.5x)"
    )
    # 2. Peak RSS of the runner (RUSAGE_CHILDREN: the largest waited-for child).
    store = _store(tmp, kind, "rss")
    _ledger(store, "admit", "big")
    probe = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *LEDGER, "--store", store, "run", "big", "--owner", "b",
         "--lease", "1m", "--", "cat", str(big)],
        capture_output=True, env=_env(), check=True,
    ).stdout  # fmt: skip
    rss_mib = int(out.split()[-1]) / 1024
    print(
        f"2. peak RSS of ledger run printing {mib} MiB (keep 1 MiB): {rss_mib:.1f} MiB "
        f"(target <= 33 MiB)"
    )
    big.unlink()
    _ = resource  # (the child reads it)


def drain(tmp: Path, kind: str, tasks: int, rounds: int) -> None:
    lines = b"".join(b'{"key":"t%05d"}\n' % i for i in range(tasks))
    kept, bare = [], []
    for r in range(rounds):
        for keep, into in (("1MiB", kept), ("0", bare)):
            store = _store(tmp, kind, f"drain{r}-{keep}")
            _ledger(store, "admit", "--batch", "-", stdin=lines)
            t0 = time.perf_counter()
            subprocess.run(
                [*LEDGER, "--store", store, "run", "--next", "--drain", "--owner", "w",
                 "--lease", "1m", "--keep-output", keep, "--", "true"],
                check=True, env=_env(), stdout=subprocess.DEVNULL,
            )  # fmt: skip
            into.append(time.perf_counter() - t0)
    a, b = statistics.median(kept), statistics.median(bare)
    print(
        f"3. run --next --drain of {tasks} tasks ({kind}): output kept {a:.2f}s "
        f"({tasks / a:,.0f}/s), --keep-output 0 {b:.2f}s ({tasks / b:,.0f}/s): "
        f"{a / b:.2f}x (target <= 1.25x)"
    )


def wait_reads(keys: int) -> None:
    from ledger_cli.cli import context
    from ledger_cli.cli.commands import wait
    from ledger_cli.engine.memstore import MemStore
    from ledger_cli.engine.record import TaskState

    class Counting(MemStore):
        loads = 0

        def load(self, key: str) -> TaskState | None:
            Counting.loads += 1
            return super().load(key)

    store = Counting()
    from ledger_cli.engine.instant import Instant

    t0 = Instant.now()
    names = [f"k{i:05d}" for i in range(keys)]
    for i, key in enumerate(names):
        status = "pending" if i >= keys - 10 else "completed"
        store.compare_and_swap(
            key, None, TaskState(key=key, status=status, sequence=1, created_at=t0, updated_at=t0)
        )
    polls: list[int] = []
    real_sleep = wait._sleep

    def counting_sleep(every: float, deadline: float | None) -> bool:
        polls.append(Counting.loads)
        return len(polls) < 4 and real_sleep(0.0, None)

    wait._sleep = counting_sleep  # type: ignore[assignment]
    saved = context.open_store
    context.open_store = lambda url: store  # type: ignore[assignment]
    try:
        settings = context.Settings(store="memory:", json=True)
        with open(os.devnull, "w") as sink:
            old, sys.stdout, sys.stderr = (sys.stdout, sys.stderr), sink, sink
            try:
                wait.wait(settings, names, interval="1s")
            finally:
                sys.stdout, sys.stderr = old
    finally:
        wait._sleep = real_sleep
        context.open_store = saved
    per_poll = [b - a for a, b in itertools.pairwise(polls)]
    print(
        f"4. ledger wait on {keys:,} keys, 10 unsettled: the check and first poll read "
        f"{polls[0]:,} records; each later poll reads {per_poll} (target: 10)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--wait-keys", type=int, default=10_000)
    ap.add_argument("--store", choices=("json", "sqlite"), default="json")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--only", choices=("throughput", "drain", "wait"), help="run one of the figures"
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_output-"))
    try:
        if args.only in (None, "throughput"):
            throughput(tmp, args.store, args.size_mib, args.rounds)
        if args.only in (None, "drain"):
            drain(tmp, args.store, args.tasks, args.rounds)
        if args.only in (None, "wait"):
            wait_reads(args.wait_keys)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
