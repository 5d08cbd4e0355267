"""The record codec of this tree against a git revision's, side by side in one run.

    .venv/bin/python benchmarks/bench_payload_codec.py [--against REV] [--rounds N] [--records N]

What the JSON store and `admit --batch` spend on payloads: `record_to_json`
and `record_from_json` of N records (default 10,000) for three payload
shapes, and the CLI's strict `parse_json` of N `admit --batch` lines (each
timed as the best of --repeat runs in a child process). The
revision's `ledger_cli` (default HEAD, i.e. what the working tree changes) is
extracted with `git archive` into a temporary directory; each round runs one
child process per tree, in alternating order, so load on the machine hits
both alike. Prints each workload's median time per tree and the ratio
(this tree / REV; below 1 is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PAYLOADS: dict[str, Callable[[int], Any]] = {
    "flat {i}": lambda i: {"i": i},
    "mixed": lambda i: {"cmd": f"job {i}", "args": [i, "x" * 40], "f": 1.5},
    "64-bit ids": lambda i: {"id": 1234567890123456789 + i, "hash": 18446744073709551615},
}


def _best(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` runs: the least disturbed by other processes."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _child(records: int, repeat: int) -> dict[str, float]:
    """Time each workload in this process (the tree is whatever is on sys.path)."""
    from ledger_cli.cli.inputs import parse_json
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.wire.decode import record_from_json
    from ledger_cli.engine.wire.encode import record_to_json

    t0 = Instant.parse("2026-01-02T03:04:05.123456789Z")
    out: dict[str, float] = {}
    for name, make in PAYLOADS.items():
        recs = [
            TaskState(
                key=f"task-{i:06d}",
                status="pending",
                sequence=1,
                task=make(i),
                created_by="bench",
                created_at=t0,
                updated_by="bench",
                updated_at=t0,
            )
            for i in range(records)
        ]
        texts = [record_to_json(r) for r in recs]
        out[f"encode {name}"] = _best(lambda recs=recs: [record_to_json(r) for r in recs], repeat)
        out[f"decode {name}"] = _best(
            lambda texts=texts: [record_from_json(t) for t in texts], repeat
        )
    lines = [f'{{"key": "task-{i:06d}", "task": {{"i": {i}, "f": 1.5}}}}' for i in range(records)]
    out["batch lines parse_json"] = _best(
        lambda: [parse_json(line, "line", 1 << 20) for line in lines], repeat
    )
    return out


def _extract(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "ledger_cli"],
        capture_output=True,
        check=True,
    ).stdout
    tar = into / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as tf:
        tf.extractall(into, filter="data")


def _run(tree: Path, records: int, repeat: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    res = subprocess.run(
        [sys.executable, __file__, "--child", str(records), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tree,
    )
    timings: dict[str, float] = json.loads(res.stdout)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="runs per workload per round")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        sys.path.insert(0, os.environ["PYTHONPATH"])
        import ledger_cli

        assert Path(ledger_cli.__file__).is_relative_to(os.environ["PYTHONPATH"])
        print(json.dumps(_child(args.child, args.repeat)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-codec-") as tmp:
        base = Path(tmp)
        _extract(args.against, base)
        trees = {"this tree": ROOT, args.against: base}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                runs[name].append(_run(trees[name], args.records, args.repeat))
    print(
        f"{args.records:,} records per workload; per round the best of {args.repeat} runs, "
        f"then the median of {args.rounds} interleaved rounds (ms); "
        f"ratio = this tree / {args.against}"
    )
    print(f"{'workload':30} {'this tree':>10} {args.against[:12]:>12} {'ratio':>7}")
    for workload in runs["this tree"][0]:
        mine = statistics.median(run[workload] for run in runs["this tree"]) * 1000
        theirs = statistics.median(run[workload] for run in runs[args.against]) * 1000
        print(f"{workload:30} {mine:10.1f} {theirs:12.1f} {mine / theirs:7.2f}")


if __name__ == "__main__":
    main()
