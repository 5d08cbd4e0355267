"""Side by side with the tools users run today: GNU parallel, task-spooler, nq and ledger.

    .venv/bin/python benchmarks/bench_peers.py [--jobs N] [--slots J] [--rounds R]
        [--dag N] [--peers parallel,tsp,nq,json,sqlite,postgresql]
        [--postgres-url URL] [--write-docs]

Every peer runs the same N jobs of `true` (default 1,000), J at a time (default 4):

- GNU parallel: `seq N | parallel -j J --joblog F true` (its resumable mode).
- task-spooler: a private server (`TS_SOCKET`, `TMPDIR` in a temporary
  directory, so the user's queue is never touched) with `tsp -S J`; N
  `tsp -n true` enqueued, then waited for until none is queued or running.
- nq: runs a queue's jobs one after another, so J queues (a private `NQDIR`
  each), jobs dealt round-robin, then `nq -w` on each.
- ledger on JSON, SQLite and PostgreSQL: `ledger admit --batch` of the N keys,
  then J `ledger run --next --drain -- true` workers; the wall time is both
  (admission included, as tsp's and nq's enqueueing is), the drain alone is
  reported too. PostgreSQL is the server at --postgres-url (default
  $LEDGER_TEST_PG, then the local test server) in a fresh schema, dropped
  afterwards; skipped with the reason when unreachable.

Then a DAG of --dag tasks (default 1,000): one root, --dag - 2 tasks that need it
(fan-out), one sink that needs all of them (fan-in), for the peers that can
express it: ledger (`--needs`); tsp (`-D root` for the fan-out; tsp 1.0.1's -D
takes one id, so the sink is `-D <last> -N J`: queued last and needing every
slot, it starts only once every earlier job has finished); nq (one queue: every
job waits for all earlier ones, a topological order run one at a time).

Rounds (default 3) interleave the peers (each round runs every peer in turn,
starting one further along than the round before) so that a shared machine's
load falls on all alike; the figures are medians. Printed:
wall time, jobs/s, and the rate as a ratio to GNU parallel's and to task-spooler's.
A peer that is not installed is skipped with a note. `--write-docs` also writes
the table into docs/performance.md between its `bench_peers figures` markers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_queue import DEFAULT_PG, pg_problem, places  # noqa: E402

PEERS = ["parallel", "tsp", "nq", "json", "sqlite", "postgresql"]
NAMES = {
    "parallel": "GNU parallel `-j {j} --joblog`",
    "tsp": "task-spooler `tsp -S {j}`",
    "nq": "nq, {j} queues",
    "json": "ledger, JSON store, {j} `--drain` workers",
    "sqlite": "ledger, SQLite, {j} `--drain` workers",
    "postgresql": "ledger, PostgreSQL, {j} `--drain` workers",
}
BINARIES = {"parallel": "parallel", "tsp": "tsp", "nq": "nq"}
LEDGER_KINDS = ("json", "sqlite", "postgresql")


def ledger_env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    out.pop("PYTHONDONTWRITEBYTECODE", None)  # time start-up as users see it
    out["PYTHONPATH"] = str(ROOT)
    return out


def ledger_cmd() -> list[str]:
    """The installed `ledger` beside this interpreter, else `python -m ledger_cli`."""
    exe = Path(sys.executable).with_name("ledger")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ledger_cli"]


def check(cmd: list[str], env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}… failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


# --- the flat run: N jobs of `true`, J at a time ------------------------------------------


def run_parallel(n: int, j: int, work: Path) -> float:
    joblog = work / "joblog"
    seq = "".join(f"{i}\n" for i in range(n))
    t = time.perf_counter()
    check(["parallel", "-j", str(j), "--joblog", str(joblog), "true"], stdin=seq)
    took = time.perf_counter() - t
    done = joblog.read_text().splitlines()[1:]
    if len(done) != n:
        raise SystemExit(f"parallel: {len(done)} jobs in the joblog, not {n}")
    return took


@contextlib.contextmanager
def tsp_server(j: int, work: Path, n: int) -> Iterator[dict[str, str]]:
    """A private task-spooler server: its socket and output files in `work`."""
    env = dict(os.environ, TS_SOCKET=str(work / "ts.sock"), TMPDIR=str(work))
    env["TS_MAXFINISHED"] = str(n + 10)  # keep every finished job listed, to count them
    env.pop("TS_SAVELIST", None)
    env.pop("TS_ONFINISH", None)
    try:
        check(["tsp", "-S", str(j)], env)
        yield env
    finally:
        subprocess.run(["tsp", "-K"], env=env, capture_output=True, check=False)


def tsp_wait_all(env: dict[str, str], last: int, n: int) -> None:
    """Wait for the last job, then for every job still queued or running, until
    the list shows n finished."""
    check(["tsp", "-w", str(last)], env)
    while True:
        rows = check(["tsp", "-l"], env).splitlines()[1:]
        busy = [r.split()[0] for r in rows if r.split()[1] in ("running", "queued", "allocating")]
        if not busy:
            break
        for job in busy:
            subprocess.run(["tsp", "-w", job], env=env, capture_output=True, check=False)
    finished = sum(1 for r in rows if r.split()[1] == "finished")
    if finished != n:
        raise SystemExit(f"tsp: {finished} jobs finished, not {n}")


def run_tsp(n: int, j: int, work: Path) -> float:
    with tsp_server(j, work, n) as env:
        t = time.perf_counter()
        for _ in range(n):
            check(["tsp", "-n", "true"], env)
        tsp_wait_all(env, n - 1, n)
        return time.perf_counter() - t


def run_nq(n: int, j: int, work: Path) -> float:
    dirs = [work / f"nq{q}" for q in range(j)]
    for d in dirs:
        d.mkdir()
    t = time.perf_counter()
    for i in range(n):
        check(["nq", "-q", "true"], dict(os.environ, NQDIR=str(dirs[i % j])))
    for d in dirs:
        check(["nq", "-w"], dict(os.environ, NQDIR=str(d)))
    took = time.perf_counter() - t
    ran = sum(len(list(d.glob(",*"))) for d in dirs)
    if ran != n:
        raise SystemExit(f"nq: {ran} job logs, not {n}")
    return took


def completed(base: list[str], env: dict[str, str]) -> int:
    stats = json.loads(check([*base, "stats", "--json"], env))
    return int(stats["counts"]["completed"])


def worker(base: list[str], env: dict[str, str], owner: str, n: int) -> None:
    """One `run --next --drain` worker; started again while tasks remain (in a DAG a
    worker finds nothing ready while the root runs, or before the sink's needs are
    done, and exits 7)."""
    cmd = [*base, "run", "--next", "--drain", "--owner", owner, "--lease", "1m", "--", "true"]
    while True:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if res.returncode not in (0, 7):
            raise SystemExit(f"ledger: a --drain worker exited {res.returncode}: {res.stderr}")
        if completed(base, env) >= n:
            return
        time.sleep(0.02)


def ledger_drain(url: str, lines: list[dict[str, object]], j: int) -> tuple[float, float]:
    """(admission + drain, drain) seconds of `admit --batch` then J `--drain` workers;
    checks every task completed."""
    env = ledger_env()
    base = [*ledger_cmd(), "--store", url]
    batch = "".join(json.dumps(line) + "\n" for line in lines)
    t = time.perf_counter()
    check([*base, "admit", "--batch", "-"], env, stdin=batch)
    t_drain = time.perf_counter()
    threads = [
        threading.Thread(target=worker, args=(base, env, f"w{w}", len(lines))) for w in range(j)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    end = time.perf_counter()
    if completed(base, env) != len(lines):
        raise SystemExit(f"ledger ({url}): not every task completed")
    return end - t, end - t_drain


def flat_lines(n: int) -> list[dict[str, object]]:
    return [{"key": f"j{i:07d}"} for i in range(n)]


# --- the DAG: a root, a fan-out of n - 2 that need it, a sink that needs them all -------


def dag_lines(n: int) -> list[dict[str, object]]:
    mids = [f"m{i:07d}" for i in range(n - 2)]
    fan_out: list[dict[str, object]] = [{"key": m, "needs": ["root"]} for m in mids]
    return [{"key": "root"}, *fan_out, {"key": "sink", "needs": mids}]


def dag_tsp(n: int, j: int, work: Path) -> float:
    with tsp_server(j, work, n) as env:
        t = time.perf_counter()
        check(["tsp", "-n", "true"], env)  # job 0: the root
        for _ in range(n - 2):
            check(["tsp", "-n", "-D", "0", "true"], env)
        check(["tsp", "-n", "-D", str(n - 2), "-N", str(j), "true"], env)  # the sink
        tsp_wait_all(env, n - 1, n)
        return time.perf_counter() - t


def dag_nq(n: int, j: int, work: Path) -> float:
    return run_nq(n, 1, work)


# --- the rounds -------------------------------------------------------------------------


def missing(peer: str, pg_url: str) -> str | None:
    if peer in BINARIES:
        return None if shutil.which(BINARIES[peer]) else f"`{BINARIES[peer]}` is not installed"
    if peer == "postgresql":
        return pg_problem(pg_url)
    return None


def measure(
    peers: list[str], n: int, j: int, dag: int, rounds: int, pg_url: str
) -> dict[str, dict[str, list[float]]]:
    """Per peer, per figure (`flat`, `flat drain`, `dag`, `dag drain`): each round's seconds."""
    out: dict[str, dict[str, list[float]]] = {p: {} for p in peers}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_peers-")))
        place: dict[str, Callable[[str], str]] = {
            k: stack.enter_context(places(k, tmp, pg_url)) for k in peers if k in LEDGER_KINDS
        }
        for r in range(rounds):
            # Each round starts at the next peer, so that none always follows
            # the same one (PostgreSQL's vacuum after its run, say).
            shift = r % len(peers)
            for peer in peers[shift:] + peers[:shift]:
                print(f"  round {r + 1}/{rounds}: {peer}", file=sys.stderr, flush=True)
                work = tmp / f"{peer}-{r}"
                work.mkdir()
                got = out[peer]
                if peer == "parallel":
                    got.setdefault("flat", []).append(run_parallel(n, j, work))
                elif peer == "tsp":
                    (work / "flat").mkdir()
                    got.setdefault("flat", []).append(run_tsp(n, j, work / "flat"))
                    got.setdefault("dag", []).append(dag_tsp(dag, j, work))
                elif peer == "nq":
                    (work / "flat").mkdir()
                    got.setdefault("flat", []).append(run_nq(n, j, work / "flat"))
                    got.setdefault("dag", []).append(dag_nq(dag, j, work))
                else:
                    wall, drain = ledger_drain(place[peer](f"flat{r}"), flat_lines(n), j)
                    got.setdefault("flat", []).append(wall)
                    got.setdefault("flat drain", []).append(drain)
                    wall, drain = ledger_drain(place[peer](f"dag{r}"), dag_lines(dag), j)
                    got.setdefault("dag", []).append(wall)
                    got.setdefault("dag drain", []).append(drain)
    return out


HEAD = ["peer", "wall (s)", "jobs/s", "vs parallel", "vs tsp", "drain only (s)", "DAG (s)", "DAG/s"]


def table(results: dict[str, dict[str, list[float]]], n: int, dag: int, j: int) -> list[list[str]]:
    med = {p: {k: statistics.median(v) for k, v in got.items()} for p, got in results.items()}
    ref_p = med.get("parallel", {}).get("flat")
    ref_t = med.get("tsp", {}).get("flat")
    rows = []
    for peer, got in med.items():
        flat = got["flat"]

        def ratio(ref: float | None, flat: float = flat) -> str:
            return "" if ref is None else f"{ref / flat:.2f}\N{MULTIPLICATION SIGN}"

        rows.append(
            [
                NAMES[peer].format(j=j),
                f"{flat:.2f}",
                f"{n / flat:,.0f}",
                ratio(ref_p),
                ratio(ref_t),
                f"{got['flat drain']:.2f}" if "flat drain" in got else "",
                f"{got['dag']:.2f}" if "dag" in got else "",
                f"{dag / got['dag']:,.0f}" if "dag" in got else "",
            ]
        )
    return rows


def markdown(rows: list[list[str]], command: str, notes: list[str]) -> str:
    out = [
        f"`{command}`",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|---|" + "---:|" * (len(HEAD) - 1),
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    if notes:
        out += ["", *(f"- {note}" for note in notes)]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=1000, help="N jobs of `true` (1,000)")
    ap.add_argument("--slots", type=int, default=4, help="J at a time (4)")
    ap.add_argument("--dag", type=int, default=1000, help="tasks in the DAG (1,000)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", default=",".join(PEERS))
    default_pg = os.environ.get("LEDGER_TEST_PG") or DEFAULT_PG
    ap.add_argument("--postgres-url", default=default_pg)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    if args.jobs < 1 or args.slots < 1 or args.dag < 3 or args.rounds < 1:
        raise SystemExit("bench_peers: --jobs, --slots, --rounds >= 1 and --dag >= 3")
    notes: list[str] = []
    peers = []
    for peer in args.peers.split(","):
        if peer not in PEERS:
            raise SystemExit(f"bench_peers: unknown peer {peer!r} (known: {', '.join(PEERS)})")
        why = missing(peer, args.postgres_url)
        if why:
            notes.append(f"{NAMES[peer].format(j=args.slots)}: skipped: {why}")
        else:
            peers.append(peer)
    results = measure(peers, args.jobs, args.slots, args.dag, args.rounds, args.postgres_url)
    rows = table(results, args.jobs, args.dag, args.slots)
    print(
        f"bench_peers: {args.jobs:,} jobs of `true`, {args.slots} at a time; a DAG of"
        f" {args.dag:,}; medians of {args.rounds} interleaved rounds"
    )
    widths = [max(len(r[c]) for r in [HEAD, *rows]) for c in range(len(HEAD))]
    for row in [HEAD, *rows]:
        cells = zip(row, widths, strict=True)
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells)))
    for note in notes:
        print(note)
    if args.write_docs:
        from benchmarks.docs_figures import write_figures

        argv = " ".join(sys.argv[1:]).replace("--write-docs", "").strip()
        write_figures("bench_peers", markdown(rows, f"bench_peers.py {argv}".strip(), notes))


if __name__ == "__main__":
    main()
