"""Start-up cost of the six hot commands against the bare interpreter.

    .venv/bin/python benchmarks/bench_startup.py [--rounds N] [--records N] [--no-breakdown]
                                                 [--against REV] [--cpu] [--default-store]

Builds a JSON store holding 10,000 records, then runs, round by round, one task
through its whole life, each command a new process as in a shell loop:

    ledger admit K
    ledger claim K --owner a --lease 5m           -> F
    ledger renew K --owner a --fence F --lease 5m
    ledger release K --owner a --fence F
    ledger claim K --owner a --lease 5m           -> F2 (a second claim sample)
    ledger takeover K --owner b --lease 5m --now T+1h   (the lease is stale then)
    ledger complete K --owner b --fence F3

with `python -c pass` (the same interpreter) run before each of them, so that
load on the machine hits both alike. It prints each command's median wall time
and its ratio to the median of `python -c pass`; the target is a ratio of at
most 3.5 for every one (docs/design.md §5.1).

With `--against REV` the tree of git revision REV (extracted with `git
archive`, run through the same interpreter on a copy of the store) takes every
command too, right after this tree's, in the same rounds: the ratio this/REV
per command is measured side by side, which a change that moves modules needs
("start-up is no slower").

With `--default-store` the commands run without `--store`, on the store in
the user data directory (XDG_DATA_HOME points into the run's temporary
directory), as a user who never names a store runs them.

With `--cpu` each process is timed by the CPU time it used (user + system,
from getrusage of the children) instead of the wall clock: on a machine that
other work keeps busy the wall time of a process swings with the load, its
CPU time much less. (A wall time includes what the process waited for, its
fdatasync among them; its CPU time does not.)

The breakdown (on by default) times, in the same rounds, importing the modules
the hot commands use (imports alone, no work); then it runs `ledger claim` under
`-X importtime` and lists what the imports cost, module by module (median self
time), stdlib and ledger_cli apart. PYTHONDONTWRITEBYTECODE is removed from the children's
environment: byte-code caches are part of a normal installation's start-up.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET = 3.5
HOT = ("admit", "claim", "renew", "release", "takeover", "complete")
HOT_MODULES = (
    "ledger_cli.cli.app",
    "ledger_cli.cli.fast",
    "ledger_cli.cli.commands.admit",
    "ledger_cli.cli.commands.claim",
    "ledger_cli.cli.commands.complete",
    "ledger_cli.cli.commands.renew",
    "ledger_cli.cli.commands.release",
    "ledger_cli.cli.commands.takeover",
    "ledger_cli.engine.ledger",
    "ledger_cli.engine.wire.encode",
    "ledger_cli.stores",
    "ledger_cli.stores.jsonfile",
)


def build_store(path: Path, records: int) -> None:
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger
    from ledger_cli.stores.jsonfile import JsonFileStore

    store = JsonFileStore(path)
    ledger = Ledger(store)
    now = Instant.now()
    with store.batch():
        for i in range(records):
            ledger.admit("bench", f"filler-{i:05d}", 1, {"i": i}, now)
    # Some history of work, so the store looks lived in.
    with store.batch():
        for i in range(0, records, 10):
            key = f"filler-{i:05d}"
            fence = ledger.claim("bench", key, "w", timedelta(minutes=5), now)
            ledger.complete("bench", key, "w", fence, "completed", now)
    store.close()


def ledger_command(tree: Path = ROOT) -> list[str]:
    """What the installed `ledger` script runs, for the tree at `tree`: its
    pyproject's entry point, called as the console script calls it (so a
    tree whose entry point moved is timed through its own)."""
    with (tree / "pyproject.toml").open("rb") as f:
        module, func = tomllib.load(f)["project"]["scripts"]["ledger"].split(":")
    code = f"import sys\nfrom {module} import {func}\nsys.exit({func}())"
    return [sys.executable, "-c", code]


CPU = False
"""`--cpu`: time each process by its CPU time, not the wall clock."""


def _cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    clock = _cpu_seconds if CPU else time.perf_counter
    start = clock()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = clock() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
    return elapsed, proc.stdout.strip()


def later(minutes: int) -> str:
    from ledger_cli.engine.instant import Instant

    return str(Instant.now() + timedelta(minutes=minutes))


class Rounds:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.times: dict[str, list[float]] = defaultdict(list)
        self.other: tuple[str, list[str], dict[str, str]] | None = None
        """(tag, ledger command line, environment) of the tree of `--against`."""

    def run(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> str:
        """One sample of `name`, preceded by one of `python -c pass`."""
        env = self.env if env is None else env
        self.times["python -c pass"].append(timed([sys.executable, "-c", "pass"], env)[0])
        elapsed, out = timed(argv, env)
        self.times[name].append(elapsed)
        return out

    def life(self, ledger: list[str], key: str) -> None:
        """One task through every hot command (and, with `--against`, another
        through the other tree's, each command right after this tree's)."""
        trees = [("", ledger, self.env)]
        if self.other is not None:
            tag, other, env = self.other
            trees.append((tag, other, env))
        fences: dict[str, str] = {}

        def each(name: str, *args: str, fence: bool = False) -> None:
            for tag, cmd, env in trees:
                argv = [*cmd, name, key, *args]
                if fence:
                    argv += ["--fence", fences[tag]]
                out = self.run(f"{name}{tag}", argv, env)
                if name in ("claim", "takeover"):
                    fences[tag] = out

        owner_a = ["--owner", "a"]
        each("admit")
        each("claim", *owner_a, "--lease", "5m")
        each("renew", *owner_a, "--lease", "5m", fence=True)
        each("release", *owner_a, fence=True)
        each("claim", *owner_a, "--lease", "5m")
        each("takeover", "--owner", "b", "--lease", "5m", "--now", later(60))
        each("complete", "--owner", "b", fence=True)


def extract(rev: str, into: Path) -> Path:
    """Git revision `rev`'s tree (its `ledger_cli` package and pyproject.toml), in `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "ledger_cli", "pyproject.toml"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--no-breakdown", action="store_true", help="time the commands only")
    parser.add_argument("--against", metavar="REV", help="time git revision REV's tree as well")
    parser.add_argument("--cpu", action="store_true", help="CPU time of each process, not wall")
    parser.add_argument(
        "--default-store",
        action="store_true",
        help="no --store: the store in the user data directory (XDG_DATA_HOME)",
    )
    opts = parser.parse_args()
    global CPU
    CPU = opts.cpu

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("LEDGER_DEBUG", None)
    env.pop("LEDGER_NOW", None)
    env["PYTHONPATH"] = str(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="ledger-bench-"))
    store = tmp / "store"
    if opts.default_store:
        env["XDG_DATA_HOME"] = str(tmp / "data")
        store = tmp / "data" / "ledger_cli" / "store"
        store.parent.mkdir(parents=True)
    try:
        t0 = time.perf_counter()
        build_store(store, opts.records)
        print(f"store: {opts.records} records in {store} ({time.perf_counter() - t0:.1f}s)")
        ledger = [*ledger_command(), *store_option(store, opts.default_store)]
        print(f"ledger: the entry point of pyproject.toml; interpreter: {sys.executable}")
        load_before = os.getloadavg()[0]
        rounds = Rounds(env)
        if opts.against:
            old_tree = extract(opts.against, tmp / "against")
            old_env = {**env, "PYTHONPATH": str(old_tree)}
            old_store = tmp / "store-against"
            if opts.default_store:
                old_env["XDG_DATA_HOME"] = str(tmp / "data-against")
                old_store = tmp / "data-against" / "ledger_cli" / "store"
            shutil.copytree(store, old_store)
            other = [*ledger_command(old_tree), *store_option(old_store, opts.default_store)]
            rounds.other = (f" ({opts.against})", other, old_env)
        for i in range(3):  # warm-up: byte-code caches, the page cache
            rounds.life(ledger, f"warm-{i}")
        rounds.times.clear()
        imports = [sys.executable, "-c", "import " + ", ".join(HOT_MODULES)]
        for i in range(opts.rounds):
            rounds.life(ledger, f"bench-{i}")
            if not opts.no_breakdown:
                rounds.run("(import hot modules)", imports)
        times = rounds.times
        base = statistics.median(times["python -c pass"])
        print(
            f"{opts.rounds} rounds, each command after a `python -c pass`; medians of "
            f"{'CPU time (user + system)' if CPU else 'wall time'} "
            f"(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after):"
        )
        for name in ("python -c pass", *HOT, "(import hot modules)"):
            if name in times:
                med = statistics.median(times[name])
                n = len(times[name])
                print(f"  {name:<22} {med * 1000:7.1f} ms   ratio {med / base:4.2f}x   (n={n})")
        if rounds.other is not None:
            tag = rounds.other[0]
            print(f"this tree against{tag}, side by side (ratio of medians; 1.00 is no change):")
            for name in HOT:
                med, old = statistics.median(times[name]), statistics.median(times[name + tag])
                ms = f"{med * 1000:7.1f} ms against {old * 1000:7.1f} ms"
                print(f"  {name:<22} {ms}   {med / old:4.2f}x")
        worst_name = max(HOT, key=lambda n: statistics.median(times[n]))
        worst = statistics.median(times[worst_name]) / base
        verdict = "within" if worst <= TARGET else "OVER"
        print(f"worst: {worst_name} {worst:.2f}x: {verdict} the {TARGET:g}x target")
        if not opts.no_breakdown:
            keys = [f"breakdown-{n}" for n in range(7)]
            for key in keys:
                timed([*ledger, "admit", key], env)
            argvs = [[*ledger, "claim", key, "--owner", "a", "--lease", "5m"] for key in keys]
            import_breakdown(argvs, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def store_option(store: Path, default: bool) -> list[str]:
    """`--store STORE`, or nothing when STORE is the default store (`--default-store`)."""
    return [] if default else ["--store", str(store)]


def import_breakdown(argvs: list[list[str]], env: dict[str, str]) -> None:
    """Median self time per module imported by the `ledger` command lines `argvs`."""
    self_us: dict[str, list[int]] = defaultdict(list)
    for argv in argvs:
        # A `ledger` script runs as `python -X importtime SCRIPT …`; else it is `python -m`.
        traced = [sys.executable, "-X", "importtime", *argv[1:]]
        if argv[0] != sys.executable:
            traced = [sys.executable, "-X", "importtime", *argv]
        proc = subprocess.run(traced, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
        for line in proc.stderr.splitlines():
            if line.startswith("import time:") and "self [us]" not in line:
                own, _cumulative, name = line[len("import time:") :].split("|", 2)
                self_us[name.strip()].append(int(own))
    _print_breakdown(self_us, env, len(argvs))


def _print_breakdown(self_us: dict[str, list[int]], env: dict[str, str], runs: int) -> None:
    base = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True
    )
    at_start = {
        line.rsplit("|", 1)[1].strip()
        for line in base.stderr.splitlines()
        if line.startswith("import time:") and "self [us]" not in line
    }
    medians = {n: statistics.median(v) for n, v in self_us.items() if n not in at_start}
    ours = {n: t for n, t in medians.items() if n.startswith("ledger_cli")}
    other = {n: t for n, t in medians.items() if n not in ours}
    print(f"imports of `ledger claim` beyond `python -c pass` (-X importtime, median of {runs}):")
    for title, group in (("ledger_cli", ours), ("stdlib and others", other)):
        total = sum(group.values()) / 1000
        top = sorted(group.items(), key=lambda kv: -kv[1])
        print(f"  {title}: {total:5.1f} ms in {len(group)} modules")
        for start in range(0, min(len(top), 24), 6):
            row = ", ".join(f"{name} {us / 1000:.2f}" for name, us in top[start : start + 6])
            print(f"    {row}")


if __name__ == "__main__":
    main()
