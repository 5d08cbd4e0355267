"""A queue that stays fast at 100,000 tasks: JSON, SQLite and PostgreSQL side by side.

    .venv/bin/python benchmarks/bench_queue.py [--quick] [--tasks N] [--claims K]
        [--drain N] [--drain-long N] [--dir DIR] [--postgres-url URL]
        [--rounds R] [--workers W] [--stores json,sqlite,postgresql]

For each store kind, stores are built through the library (batched admits,
10,000 per `store.batch()`), then measured with the `ledger` command as a
user runs it (a fresh process each time, bytecode caching allowed):

- `claim --next` (median of K claims, each a new process, taken in turn
  with K on a store with 100 ready tasks, the baseline, so that a shared
  machine's load falls on both) with N ready tasks, with N pending tasks
  that wait on an unfinished need plus 100 ready, with N finished
  (completed) records plus 100 ready, and with those N records pruned
  (`Ledger.prune`), with N ready tasks spread over 21 priority levels plus
  100 ready (docs/design.md §8.2), with N tasks not due until tomorrow plus 100
  ready (§8.1), and with N tasks over 20 queues, each admitted after the one
  before, the first two at a limit of 1 with their slot held (§8.7):
  plain and with `--queue q19`, the last queue, behind 95% of the tasks.
  Printed as ratios to the baseline; the targets: <= 1.5 on JSON and
  SQLite, <= 2 on PostgreSQL. On the JSON store, the disk a pruned key
  costs: `du -sk STORE/pruned` / N (target: <= 256 bytes).
- drain throughput, both ways side by side: 8 (--workers) concurrent worker loops
  starting one `ledger run --next … -- sh -c 'echo $LEDGER_KEY >> LOG'`
  process per task over a store of --drain tasks (default 400), and as many
  long-lived `ledger run --next --drain …` workers running the same command
  over a store of --drain-long tasks (default 2,000: at 400 their start-up,
  not the queue, was most of the time and the figure swung run to run);
  tasks/s, checking that every task ran exactly once (the log), and the
  PostgreSQL / SQLite ratio of each (the target: at least 1). The drains run
  after every other measurement, in --rounds rounds (default 3), each round
  draining every kind in turn: the figures are the medians, the ratio the
  median of the rounds' ratios (the machine's load changes from minute to
  minute; one drain after another, minutes apart, swung it 0.66-0.95).
- `ledger list --jsonl` on the store of N ready tasks: the time to the
  first row and rows/s (target: the first row within 0.2 s).

N is 100,000 (`--quick`: 10,000). `--queues-only`: the base and the 20-queue
claims alone (no other store, no drains, no docs table). `--write-docs` also writes the table into
docs/performance.md, between its `bench_queue figures` markers. PostgreSQL is the server at
--postgres-url (default $LEDGER_TEST_POSTGRES_URL or the local test server),
in fresh schemas dropped afterwards; skipped with the reason when unreachable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger_cli.engine.instant import Instant  # noqa: E402
from ledger_cli.engine.ledger import Ledger  # noqa: E402
from ledger_cli.stores import open_store  # noqa: E402

T0 = Instant.parse("2026-01-01T00:00:00Z")
BASE = 100
CHUNK = 10_000
DEFAULT_PG = "postgresql://ledger:ledger@127.0.0.1:5432/ledger_test"


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    out.pop("PYTHONDONTWRITEBYTECODE", None)  # time start-up as users see it
    out["PYTHONPATH"] = str(ROOT)
    return out


def ledger(url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [sys.executable, "-m", "ledger_cli", "--store", url, *args],
        capture_output=True,
        text=True,
        env=env(),
        check=False,
    )
    if check and res.returncode != 0:
        raise SystemExit(f"ledger {' '.join(args)} failed ({res.returncode}): {res.stderr}")
    return res


def admit_many(
    url: str,
    keys: list[str],
    *needs: str,
    start_s: int = 0,
    levels: int = 0,
    not_before: Instant | None = None,
    queue: str = "default",
) -> None:
    """Admit keys in batches through the library, CreatedAt increasing by 1 µs;
    `levels`: priorities spread over that many levels from -1000 to 1000
    (docs/design.md §8.2); `not_before`: none due before it (§8.1); `queue`:
    their queue (§8.7)."""
    store = open_store(url)
    led = Ledger(store)
    step = 2000 // (levels - 1) if levels > 1 else 0
    try:
        for at in range(0, len(keys), CHUNK):
            with store.batch():
                for i, key in enumerate(keys[at : at + CHUNK], at):
                    now = Instant.from_unix_ns(T0.unix_ns + (start_s * 10**9) + i * 1000, 0)
                    if levels or not_before is not None or queue != "default":
                        prio = -1000 + step * (i % levels) if levels else 0
                        led.admit_outcome(
                            "bench",
                            key,
                            1,
                            {"i": i},
                            now,
                            *needs,
                            not_before=not_before,
                            priority=prio,
                            queue=queue,
                        )
                    else:
                        led.admit("bench", key, 1, {"i": i}, now, *needs)
    finally:
        store.close()


def finish_many(url: str, keys: list[str]) -> None:
    store = open_store(url)
    led = Ledger(store)
    try:
        for at in range(0, len(keys), CHUNK):
            with store.batch():
                for key in keys[at : at + CHUNK]:
                    fence = led.claim("bench", key, "f", timedelta(hours=1), T0)
                    led.complete("bench", key, "f", fence, "completed", T0)
    finally:
        store.close()


def paired_ratio(base: str, url: str, k: int, base_times: list[float], *args: str) -> float:
    """median claim time on `url` / median on `base`, the two measured in turn
    (base, url, base, url, …) so that the load of a shared machine falls on both;
    the base times are kept in `base_times`. `args`: more options of the claims
    on `url` (`--queue`)."""
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(k):
        mine.append(claim_cost(base, 1))
        theirs.append(claim_cost(url, 1, *args))
    base_times.extend(mine)
    return statistics.median(theirs) / statistics.median(mine)


def claim_cost(url: str, k: int, *args: str) -> float:
    times = []
    for _ in range(k):
        t = time.perf_counter()
        ledger(url, "claim", "--next", "--owner", "bench", "--lease", "1h", *args)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


DRAIN_PROCESS = "drain, a process per task (tasks/s)"
DRAIN_LONG = "drain, --drain workers (tasks/s)"
RATIO = {
    DRAIN_PROCESS: "drain PostgreSQL / SQLite, a process per task",
    DRAIN_LONG: "drain PostgreSQL / SQLite, --drain",
}


def drain(url: str, n: int, log: Path, long_lived: bool = False, workers: int = 8) -> float:
    """tasks/s of `workers` workers: loops of `run --next` (a process per task), or
    `run --next --drain` workers (one process each, claiming until none is ready)."""
    admit_many(url, [f"d{i:05d}" for i in range(n)])
    log.write_text("")
    worker = (
        "import os,subprocess,sys\n"
        "url,log,drain=sys.argv[1],sys.argv[2],sys.argv[3:]\n"
        "while True:\n"
        "    rc=subprocess.run([sys.executable,'-m','ledger_cli','--store',url,'run','--next',"
        "*drain,'--owner',str(os.getpid()),'--lease','1m','--','sh','-c',"
        "'echo $LEDGER_KEY >> '+log]).returncode\n"
        "    if rc==7 or (drain and rc==0): break\n"
        "    if rc!=0: sys.exit(rc)\n"
    )
    extra = ["--drain"] if long_lived else []
    t = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", worker, url, str(log), *extra], env=env())
        for _ in range(workers)
    ]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit(f"a drain worker failed with {p.returncode}")
    took = time.perf_counter() - t
    ran = log.read_text().split()
    if sorted(ran) != [f"d{i:05d}" for i in range(n)]:
        raise SystemExit(f"drain: {len(ran)} runs for {n} tasks, {len(set(ran))} distinct")
    return n / took


def list_cost(url: str) -> tuple[float, float]:
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger_cli", "--store", url, "list", "--jsonl"],
        stdout=subprocess.PIPE,
        env=env(),
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    first = time.perf_counter() - t
    rows = 1 + sum(1 for _ in proc.stdout)
    proc.wait()
    return first, rows / (time.perf_counter() - t)


@contextlib.contextmanager
def places(kind: str, base: Path, pg_url: str) -> Iterator[Callable[[str], str]]:
    """A factory of fresh store URLs of one kind."""
    schemas: list[str] = []
    if kind == "json":
        yield lambda name: f"json:{base / name}"
    elif kind == "sqlite":
        yield lambda name: f"sqlite:{base / (name + '.db')}"
    else:
        from urllib.parse import quote

        import psycopg

        def make(name: str) -> str:
            schema = f"bench_queue_{name}_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{schema}"')
            schemas.append(schema)
            sep = "&" if "?" in pg_url else "?"
            return f"{pg_url}{sep}options={quote(f'-c search_path={schema}')}"

        try:
            yield make
        finally:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                for schema in schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def pg_problem(url: str) -> str | None:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return None
    except Exception as exc:  # any failure is a reason to skip
        return " ".join(str(exc).split())[:120] or type(exc).__name__


def bench_kind(
    kind: str, n: int, k: int, base: Path, pg: str, queues_only: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with places(kind, base, pg) as place:
        say = lambda what: print(f"  [{kind}] {what}", file=sys.stderr, flush=True)  # noqa: E731
        say(f"building stores of {n:,} tasks")
        small = place("base")
        admit_many(small, [f"r{i:06d}" for i in range(BASE + 6 * k)])
        if queues_only:
            queued = place("queues")
            build_queues(queued, n)
            say("timing claim --next")
            ledger(small, "state", "r000000", check=False)  # warm-up: bytecode caches written
            base_times: list[float] = []
            out.update(queue_ratios(small, queued, n, k, base_times))
            out["claim base (s)"] = statistics.median(base_times)
            return out
        big = place("ready")
        admit_many(big, [f"r{i:06d}" for i in range(n)])
        waiting = place("waiting")
        admit_many(waiting, ["gate"])
        store = open_store(waiting)
        Ledger(store).claim("bench", "gate", "holder", timedelta(days=3650), T0)
        store.close()
        admit_many(waiting, [f"w{i:06d}" for i in range(n)], "gate", start_s=-100)
        admit_many(waiting, [f"r{i:06d}" for i in range(BASE + k)], start_s=100)
        finished = place("finished")
        done = [f"f{i:06d}" for i in range(n)]
        admit_many(finished, done, start_s=-100)
        finish_many(finished, done)
        admit_many(finished, [f"r{i:06d}" for i in range(BASE + k)], start_s=100)
        # docs/design.md §8.2: N ready tasks over 21 priority levels, plus 100 ready at 0.
        levels = place("priorities")
        admit_many(levels, [f"p{i:06d}" for i in range(n)], levels=21)
        admit_many(levels, [f"r{i:06d}" for i in range(BASE + k)], start_s=100)
        # docs/design.md §8.1: N tasks not due until tomorrow ahead of 100 ready ones.
        delayed = place("delayed")
        tomorrow = Instant.now() + timedelta(days=1)
        admit_many(delayed, [f"d{i:06d}" for i in range(n)], start_s=-100, not_before=tomorrow)
        admit_many(delayed, [f"r{i:06d}" for i in range(BASE + k)], start_s=100)
        queued = place("queues")
        build_queues(queued, n)
        say("timing claim --next")
        ledger(small, "state", "r000000", check=False)  # warm-up: bytecode caches written
        base_times: list[float] = []
        out["claim base (s)"] = 0.0  # (the median of every base claim, below)
        out[f"claim {n:,} ready / {BASE}"] = paired_ratio(small, big, k, base_times)
        out[f"claim {n:,} waiting / {BASE}"] = paired_ratio(small, waiting, k, base_times)
        out[f"claim {n:,} finished / {BASE}"] = paired_ratio(small, finished, k, base_times)
        out[f"claim {n:,} over 21 priorities / {BASE}"] = paired_ratio(small, levels, k, base_times)
        out[f"claim {n:,} not due + {BASE} / {BASE}"] = paired_ratio(small, delayed, k, base_times)
        out.update(queue_ratios(small, queued, n, k, base_times))
        say(f"pruning {n:,} finished records")
        store = open_store(finished)
        pruned = Ledger(store).prune(timedelta(0), Instant.now())
        store.close()
        if pruned != n:
            raise SystemExit(f"prune pruned {pruned} records, not {n}")
        out[f"claim {n:,} pruned / {BASE}"] = paired_ratio(small, finished, k, base_times)
        out["claim base (s)"] = statistics.median(base_times)
        if kind == "json":
            path = finished.removeprefix("json:") + "/pruned"
            du = subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=True)
            out["du bytes per pruned key"] = int(du.stdout.split()[0]) * 1024 / n
        say("list --jsonl")
        first, rate = list_cost(big)
        out[f"list first row at {n:,} (s)"] = first
        out["list rows/s"] = rate
    return out


QUEUES = 20
FULL_QUEUES = 2


def queue_ratios(
    small: str, queued: str, n: int, k: int, base_times: list[float]
) -> dict[str, float]:
    """claim --next (docs/design.md §8.7), plain and --queue of the last queue, on 20 queues
    whose first FULL_QUEUES are at their limit."""
    last = f"q{QUEUES - 1:02d}"
    return {
        f"claim {n:,} in {QUEUES} queues / {BASE}": paired_ratio(small, queued, k, base_times),
        f"claim --queue {last} {n:,} in {QUEUES} queues / {BASE}": paired_ratio(
            small, queued, k, base_times, "--queue", last
        ),
    }


def build_queues(url: str, n: int) -> None:
    """`n` ready tasks over QUEUES queues `q00`…`q19`, each queue's admitted
    after the one before it (so the last queue's tasks sit behind every other
    task in the Ready order), the first FULL_QUEUES at a limit of 1 with their
    one slot held by a long lease: a plain `claim --next` passes over the
    full queues' n/10 tasks, `--queue q19` over the other 95%."""
    per = n // QUEUES
    for q in range(QUEUES):
        name = f"q{q:02d}"
        admit_many(url, [f"{name}-{i:06d}" for i in range(per)], start_s=q, queue=name)
    store = open_store(url)
    try:
        led = Ledger(store)
        for q in range(FULL_QUEUES):
            name = f"q{q:02d}"
            led.claim("bench", f"{name}-000000", "holder", timedelta(days=3650), T0)
            store.set_limit(name, 1)  # type: ignore[attr-defined]
    finally:
        store.close()


def bench_drains(
    kinds: list[str], rounds: int, workers: int, drain_n: int, long_n: int, base: Path, pg: str
) -> dict[str, dict[str, Any]]:
    """The drains, kind after kind in each of `rounds` rounds, so that a shared
    machine's load falls on every kind alike: per kind the median tasks/s,
    and per round the PostgreSQL / SQLite ratio (its median is reported)."""
    out: dict[str, dict[str, Any]] = {kind: {} for kind in kinds}
    rates: dict[tuple[str, str], list[float]] = {}
    with contextlib.ExitStack() as stack:
        place = {kind: stack.enter_context(places(kind, base, pg)) for kind in kinds}
        for r in range(rounds):
            for kind in kinds:
                say = f"  [{kind}] drain round {r + 1} of {rounds}:"
                print(f"{say} {drain_n} tasks, a process per task", file=sys.stderr, flush=True)
                rate = drain(
                    place[kind](f"drain{r}"), drain_n, base / f"{kind}.log", False, workers
                )
                rates.setdefault((kind, DRAIN_PROCESS), []).append(rate)
                print(f"{say} {long_n} tasks, --drain workers", file=sys.stderr, flush=True)
                rate = drain(
                    place[kind](f"drainlong{r}"), long_n, base / f"{kind}.log", True, workers
                )
                rates.setdefault((kind, DRAIN_LONG), []).append(rate)
    for (kind, key), got in rates.items():
        out[kind][key] = statistics.median(got)
    if "sqlite" in kinds and "postgresql" in kinds:
        for key in (DRAIN_PROCESS, DRAIN_LONG):
            pairs = zip(rates[("postgresql", key)], rates[("sqlite", key)], strict=True)
            out["postgresql"][RATIO[key]] = statistics.median(p / s for p, s in pairs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 tasks instead of 100,000")
    parser.add_argument("--tasks", type=int, default=None)
    parser.add_argument("--claims", type=int, default=7)
    parser.add_argument("--drain", type=int, default=400)
    parser.add_argument("--drain-long", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="drain rounds (median)")
    parser.add_argument("--workers", type=int, default=8, help="drain workers")
    parser.add_argument("--dir", default=None)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("LEDGER_TEST_POSTGRES_URL") or DEFAULT_PG
    )
    parser.add_argument("--stores", default="json,sqlite,postgresql")
    parser.add_argument(
        "--queues-only",
        action="store_true",
        help="only the 20-queue claims (§8.7) against the base: no other store, no drains",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the table into docs/performance.md"
    )
    args = parser.parse_args()
    n = args.tasks or (10_000 if args.quick else 100_000)
    base = Path(tempfile.mkdtemp(prefix="bench_queue_", dir=args.dir))
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    try:
        for kind in args.stores.split(","):
            if kind == "postgresql":
                problem = pg_problem(args.postgres_url)
                if problem is not None:
                    skipped[kind] = f"no PostgreSQL server reachable ({problem})"
                    continue
            results[kind] = bench_kind(
                kind, n, args.claims, base, args.postgres_url, args.queues_only
            )
        drains = (
            {}
            if args.queues_only
            else bench_drains(
                list(results),
                args.rounds,
                args.workers,
                args.drain,
                args.drain_long,
                base,
                args.postgres_url,
            )
        )
        for kind, got in drains.items():
            results[kind].update(got)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rows = list(dict.fromkeys(r for res in results.values() for r in res))
    kinds = list(results)
    print(
        f"bench_queue: N = {n:,}, {args.claims} claims per median, drains of {args.drain:,}"
        f" tasks (a process per task) and {args.drain_long:,} (--drain), {args.workers}"
        f" workers, {args.rounds} rounds"
    )
    print(f"{'':46}" + "".join(f"{k:>14}" for k in kinds))
    for row in rows:
        cells = []
        for k in kinds:
            v = results[k].get(row)
            if v is None:
                cells.append(f"{'-':>14}")
            else:
                cells.append(f"{v:>14.3f}" if v < 100 else f"{v:>14,.0f}")
        print(f"{row:46}" + "".join(cells))
    for kind, why in skipped.items():
        print(f"{kind}: skipped: {why}")
    if args.write_docs and not args.queues_only:
        from benchmarks.docs_figures import write_figures

        argv = " ".join(sys.argv[1:]).replace("--write-docs", "").strip()
        write_figures("bench_queue", markdown(results, f"bench_queue.py {argv}".strip()))


KIND_NAMES = {"json": "JSON", "sqlite": "SQLite", "postgresql": "PostgreSQL"}


def markdown(results: dict[str, dict[str, Any]], command: str) -> str:
    """The figures as a Markdown table, a row per figure, a column per store."""
    kinds = list(results)
    rows = list(dict.fromkeys(r for res in results.values() for r in res))
    out = [
        "| `" + command + "` | " + " | ".join(KIND_NAMES.get(k, k) for k in kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    for row in rows:
        cells = []
        for k in kinds:
            v = results[k].get(row)
            cells.append("" if v is None else f"{v:.3f}" if v < 100 else f"{v:,.0f}")
        out.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
