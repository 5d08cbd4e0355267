"""`ledger stats` and each `watch` refresh with the size of the backlog.

    .venv/bin/python benchmarks/bench_stats.py [--quick] [--tasks N] [--reps R]
        [--dir DIR] [--postgres-url URL] [--stores json,sqlite,postgresql]

Each store holds BASE=100 (small) or N (big; default 100,000, `--quick`
10,000) pending tasks, every one ready, plus a few of every other status (a
claimed task, a failed one and the task it blocks, a completed one). Timed:

- in process, through the library, the median of R runs (default 5) taken in
  turn on the same store: `collect` as shipped (cli/commands/stats.py) and as it was
  before (the counts, then the ready index walked for the ready figure, each
  page of candidates a query or a lock hold, each candidate read and judged).
  Now a SQL store counts its pending candidates that name no needs in SQL
  and judges only the others; the JSON store judges the Ready rule in the
  pass its counts already make over the records. Printed in seconds, with
  before / now (the figures are checked to be the same);
- the same for what a `watch` refresh reads (watch.view without the
  drawing): before, those figures and then every unfinished record, of
  which it drew 200; now, a SQL store sorts and cuts the table in the
  database and the JSON store draws it from the pass the figures made;
- `ledger stats --json` as a process, small and big (a fresh process each
  time, bytecode caching allowed), and big / small; and on a third store
  of N tasks that each name one completed need (ready too, but the Ready
  rule must read their needs: the SQL stores judge each of them in Python),
  and on the small store plus N pruned records (docs/design.md §6.4: stats should
  cost the same with or without pruned keys); and plain `ledger stats` (no
  queue rows) on a store of N tasks in the queue `q` against the small
  store, with that store's `stats --json`, whose per-queue figures read
  every task outside `default`.

The JSON store keeps a tally (stores/jsonfile/tally.py: the counts, and
the unfinished records that need judging one by one), so its `stats`
reads the tally, the first ready record and the noted ones; "before" is
the pass over every record it made before the tally. The SQL stores' cost
grows with the rows their counts scan, in the database. PostgreSQL is the server at
--postgres-url (default the local test server), in fresh schemas dropped
afterwards; skipped with the reason when unreachable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_queue import (  # noqa: E402
    DEFAULT_PG,
    T0,
    admit_many,
    env,
    finish_many,
    pg_problem,
    places,
)

from ledger_cli.cli.commands import stats, watch  # noqa: E402
from ledger_cli.engine import ready  # noqa: E402
from ledger_cli.engine.instant import Instant  # noqa: E402
from ledger_cli.engine.ledger import Ledger  # noqa: E402
from ledger_cli.engine.prune import visible  # noqa: E402
from ledger_cli.engine.store import Store  # noqa: E402
from ledger_cli.stores import open_store  # noqa: E402
from ledger_cli.stores.jsonfile import JsonFileStore  # noqa: E402

BASE = 100


def build(url: str, n: int, needy: bool = False, queue: str = "default") -> None:
    """n ready pending tasks (`needy`: each naming the completed need x-done;
    `queue`: in that queue), and one each of claimed, failed, blocked, completed."""
    store = open_store(url)
    led = Ledger(store)
    try:
        for key in ("x-claimed", "x-failed", "x-done"):
            led.admit("bench", key, 1, None, T0)
        led.admit("bench", "x-blocked", 1, None, T0, "x-failed")
        hour = timedelta(hours=1)
        led.claim("bench", "x-claimed", "w", timedelta(days=3650), T0)  # a live lease
        for key, status in (("x-failed", "failed"), ("x-done", "completed")):
            fence = led.claim("bench", key, "w", hour, T0)
            led.complete("bench", key, "w", fence, status, T0)
    finally:
        store.close()
    admit_many(url, [f"p{i:06d}" for i in range(n)], *(("x-done",) if needy else ()), queue=queue)


def build_pruned(url: str, n: int) -> None:
    """The small store's tasks, plus n completed records, pruned (docs/design.md §6.4:
    stats costs the same with or without them)."""
    build(url, BASE)
    done = [f"f{i:06d}" for i in range(n)]
    admit_many(url, done, start_s=-100)
    finish_many(url, done)
    store = open_store(url)
    try:
        got = Ledger(store).prune(timedelta(0), Instant.now())
    finally:
        store.close()
    if got != n + 1:  # and x-done
        raise SystemExit(f"prune pruned {got} records, not {n + 1}")


def json_scan(store: Store, now: Instant) -> tuple[dict[str, int], int, dict[str, Any]]:
    """The JSON store's figures as collect computed them before its tally: a
    pass over every unpruned record (without the lock), judging the Ready
    rule in the same pass; and the records, of which `watch` drew its table."""
    counts = dict.fromkeys(stats.STATUSES, 0)
    records = {r.key: r for r in store.scan_visible()}  # type: ignore[attr-defined]
    for rec in records.values():
        counts[rec.status] += 1
    found = ready.ready_records(
        records.values(), lambda k: records[k] if k in records else store.load(k), now
    )
    return counts, len(found), records


def old_collect(store: Store, now: Instant) -> tuple[dict[str, int], int]:
    """The figures as collect computed them before: the counts (SQL stores:
    counted in the database; the JSON store: json_scan's pass over every
    record), then the ready index walked for the ready figure (each
    candidate read)."""
    if isinstance(store, JsonFileStore):
        return json_scan(store, now)[:2]
    counts = dict.fromkeys(stats.STATUSES, 0)
    counter = getattr(store, "status_counts", None)
    if counter is not None:
        counts.update(counter())
    else:
        for rec in visible(store):
            counts[rec.status] += 1
    return counts, sum(1 for _ in ready.ready_iter(store, store.load, now))


def old_refresh(store: Store, now: Instant) -> None:
    """What a `watch` refresh read before: the old figures, then every
    unfinished record (of which it drew 200; the JSON store: drawn from the
    pass its figures made)."""
    if isinstance(store, JsonFileStore):
        counts, _, records = json_scan(store, now)
        watch.unfinished(store, None, limit=watch.MAX_ROWS, counts=counts, records=records)
        return
    old_collect(store, now)
    watch.unfinished(store, None)


def refresh(store: Store, now: Instant) -> None:
    """A `watch` refresh's reads now (watch.view without the drawing)."""
    figures, records = stats.gather(store, now)
    watch.unfinished(store, None, limit=watch.MAX_ROWS, counts=figures.counts, records=records)


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def cli_s(url: str, reps: int, args: tuple[str, ...] = ("--json",)) -> float:
    """`ledger stats ARGS` as a fresh process, median seconds."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "ledger_cli", "--store", url, "stats", *args],
            capture_output=True,
            check=True,
            env=env(),
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def bench_kind(kind: str, n: int, reps: int, base: Path, pg: str) -> dict[str, float]:
    out: dict[str, float] = {}
    with places(kind, base, pg) as place:
        say = (
            f"  [{kind}] building stores of {BASE}, {n:,}, {n:,} naming a need,"
            f" {n:,} pruned, {n:,} in a queue"
        )
        print(say, file=sys.stderr, flush=True)
        small, big, needy, pruned = place("small"), place("big"), place("needy"), place("pruned")
        queued = place("queued")
        build(small, BASE)
        build(big, n)
        build(needy, n, needy=True)
        build_pruned(pruned, n)
        build(queued, n, queue="q")
        now = Instant.now()
        store = open_store(big)
        try:
            new = stats.collect(store, now)
            counts, ready_count = old_collect(store, now)
            if (counts, ready_count) != (new.counts, new.ready) or new.ready != n:
                raise SystemExit(
                    f"{kind}: old {counts, ready_count} != new {new.counts, new.ready}"
                )
            print(f"  [{kind}] timing collect, old and new", file=sys.stderr, flush=True)
            olds, news = [], []
            for _ in range(reps):
                olds.append(timed(lambda: old_collect(store, now)))
                news.append(timed(lambda: stats.collect(store, now)))
            out[f"collect at {n:,}, before (s)"] = statistics.median(olds)
            out[f"collect at {n:,}, now (s)"] = statistics.median(news)
            out["before / now"] = statistics.median(olds) / statistics.median(news)
            olds, news = [], []
            for _ in range(reps):
                olds.append(timed(lambda: old_refresh(store, now)))
                news.append(timed(lambda: refresh(store, now)))
            out[f"watch refresh at {n:,}, before (s)"] = statistics.median(olds)
            out[f"watch refresh at {n:,}, now (s)"] = statistics.median(news)
            out["before / now "] = statistics.median(olds) / statistics.median(news)
        finally:
            store.close()
        print(f"  [{kind}] timing ledger stats", file=sys.stderr, flush=True)
        cli_s(small, 1)  # warm-up: bytecode caches written
        small_s, big_s, needy_s = cli_s(small, reps), cli_s(big, reps), cli_s(needy, reps)
        pruned_s = cli_s(pruned, reps)
        out[f"ledger stats at {BASE} (s)"] = small_s
        out[f"ledger stats at {n:,} (s)"] = big_s
        out[f"ledger stats {n:,} / {BASE}"] = big_s / small_s
        out[f"  {n:,} naming a need (s)"] = needy_s
        out[f"  {n:,} naming a need / {BASE}"] = needy_s / small_s
        out[f"  {BASE} + {n:,} pruned (s)"] = pruned_s
        out[f"  {BASE} + {n:,} pruned / {BASE}"] = pruned_s / small_s
        # The per-queue figures read every task outside `default`: plain
        # `stats` (no queue rows) does not; `--json` (its "queues") does.
        text_small, text_s = cli_s(small, reps, ()), cli_s(queued, reps, ())
        out[f"  {n:,} in a queue, plain stats / {BASE}"] = text_s / text_small
        out[f"  {n:,} in a queue, --json (s)"] = cli_s(queued, reps)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 tasks instead of 100,000")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("LEDGER_TEST_POSTGRES_URL") or DEFAULT_PG
    )
    parser.add_argument("--stores", default="json,sqlite,postgresql")
    args = parser.parse_args()
    n = args.tasks or (10_000 if args.quick else 100_000)
    results: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench_stats_", dir=args.dir) as tmp:
        for kind in args.stores.split(","):
            if kind == "postgresql" and (problem := pg_problem(args.postgres_url)) is not None:
                skipped[kind] = f"no PostgreSQL server reachable ({problem})"
                continue
            results[kind] = bench_kind(kind, n, args.reps, Path(tmp), args.postgres_url)
    rows = list(dict.fromkeys(r for res in results.values() for r in res))
    print(f"bench_stats: N = {n:,}, {args.reps} runs per median")
    print(f"{'':36}" + "".join(f"{k:>12}" for k in results))
    for row in rows:
        cells = [results[k].get(row) for k in results]
        print(f"{row:36}" + "".join(f"{'-':>12}" if v is None else f"{v:>12.3f}" for v in cells))
    for kind, why in skipped.items():
        print(f"{kind}: skipped: {why}")


if __name__ == "__main__":
    main()
