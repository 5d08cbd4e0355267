"""Admission throughput in one batch: the JSON, SQLite and PostgreSQL stores side by side.

    .venv/bin/python benchmarks/bench_admit_batch.py [--tasks N] [--rounds N]
        [--dir DIR] [--postgres-url URL] [--stores json,json-nodeps,sqlite,postgresql]
        [--needs K] [--per-admit] [--pruned P] [--queue Q] [--priority N]

Each round admits N tasks (default 10,000) through `Ledger.admit` inside one
`store.batch()` on a fresh, empty store of each kind, stores interleaved round
by round so load on the machine hits them alike. The time counted runs from
the first admit to the return of the batch, whose commit makes every task
durable (the JSON store: fsynced files and directory; SQLite: one transaction
committed with synchronous=FULL, i.e. the WAL fsynced; PostgreSQL: one
transaction committed with the server's synchronous_commit, on by default).
After each round the store is reopened and the count of records checked.

Prints each store's median and best tasks/s, and the ratio of each median to
SQLite's (to the first store's when SQLite is not run). The issue's target:
SQLite >= 20,000 tasks/s.

`--needs K`: task i names the K tasks before it as needs (unfinished: they
wait), so the stores index them (the JSON store: deps/, its one reverse-needs
index; releases before it also kept ready/needs/). `--per-admit`: each admit
in its own batch, durable on its own, as `ledger admit` does (use fewer
--tasks). `json-nodeps` (not run by default) is the JSON store with its deps/
index switched off, to put beside `json`: the admission cost with no
reverse-needs index at all (a floor only: such a store would not promote the
waiting tasks when their needs complete).

`--queue Q`, `--priority N`: every task is admitted into queue Q, with
priority N (through `Ledger.admit_outcome`, as `ledger admit --batch` does),
so the stores write each key's queue and schedule beside its record (the
JSON store: its side files, carried by the batch's commit).

`--pruned P`: each store also runs a round on a store that first holds P
finished records, pruned (made before the clock starts), where the batch
admits the N new tasks and then the P pruned keys again (each a no-op that
must find its key's pruned line): printed as `<store>+pruned`, beside the
store alone.

Stores are files under --dir (default: a temporary directory on the disk that
holds the system temp directory; tmpfs would make fsync free, so it is
refused). PostgreSQL is the server at --postgres-url (default
$LEDGER_TEST_POSTGRES_URL or the local test server), in a fresh schema dropped
afterwards; it is skipped with the reason when unreachable, and so is the JSON
store when it cannot be imported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ledger_cli.engine.instant import Instant  # noqa: E402
from ledger_cli.engine.ledger import Ledger  # noqa: E402
from ledger_cli.engine.store import Store  # noqa: E402

DEFAULT_POSTGRES_URL = "postgresql://ledger:ledger@127.0.0.1:5432/ledger_test"
TARGET_SQLITE = 20_000

Opener = Callable[[int], Store]
"""Open a fresh empty store for round r (or reopen round r's store when asked twice)."""


def payload(i: int) -> dict[str, Any]:
    return {"cmd": f"backup.sh --shard {i % 64}", "n": i}


def admit_round(
    store: Store,
    tasks: int,
    needs: int = 0,
    per_admit: bool = False,
    queue: str | None = None,
    priority: int = 0,
) -> float:
    ledger = Ledger(store)
    now = Instant.now()

    def admit(i: int) -> None:
        named = [f"task-{j:06d}" for j in range(max(0, i - needs), i)]
        key = f"task-{i:06d}"
        if queue is None and not priority:
            ledger.admit("bench", key, 1, payload(i), now, *named)
            return
        ledger.admit_outcome(
            "bench", key, 1, payload(i), now, *named, priority=priority, queue=queue or "default"
        )

    started = time.perf_counter()
    if per_admit:
        for i in range(tasks):
            with store.batch():
                admit(i)
    else:
        with store.batch():
            for i in range(tasks):
                admit(i)
    return time.perf_counter() - started


def with_pruned(store: Store, n: int) -> list[str]:
    """`n` finished records, pruned: their keys."""
    from datetime import timedelta

    ledger = Ledger(store)
    now = Instant.now()
    keys = [f"old-{i:07d}" for i in range(n)]
    with store.batch():
        for key in keys:
            ledger.admit("bench", key, 1, None, now)
            fence = ledger.claim("bench", key, "w", timedelta(minutes=5), now)
            ledger.complete("bench", key, "w", fence, "completed", now)
    if ledger.prune(timedelta(0), Instant.now()) != n:
        raise SystemExit(f"prune did not prune the {n} records")
    return keys


def readmit_round(store: Store, tasks: int, keys: list[str]) -> float:
    """`admit_round`, then the pruned `keys` again, in the same batch."""
    ledger = Ledger(store)
    now = Instant.now()
    started = time.perf_counter()
    with store.batch():
        for i in range(tasks):
            ledger.admit("bench", f"task-{i:06d}", 1, payload(i), now)
        for key in keys:
            if ledger.admit_outcome("bench", key, 1, None, now).word != "duplicate":
                raise SystemExit(f"pruned key {key} was not a duplicate")
    return time.perf_counter() - started


def count(store: Store) -> int:
    return sum(1 for _ in store.range())


@contextlib.contextmanager
def json_kind(base: Path) -> Iterator[tuple[Opener | None, str]]:
    try:
        from ledger_cli.stores.jsonfile import JsonFileStore
    except ImportError as exc:
        yield None, f"not importable yet ({exc})"
        return

    def opener(r: int) -> Store:
        return JsonFileStore(base / f"json-{r}")

    yield opener, ""


@contextlib.contextmanager
def json_nodeps_kind(base: Path) -> Iterator[tuple[Opener | None, str]]:
    """The JSON store with its deps/ index switched off (the cost before it)."""
    try:
        from ledger_cli.stores.jsonfile import JsonFileStore, apply
    except ImportError as exc:
        yield None, f"not importable yet ({exc})"
        return

    class WithoutDeps(JsonFileStore):
        def _write_records(self, *args: Any, **kwargs: Any) -> None:
            saved = apply.index_needs
            apply.index_needs = lambda *a, **k: None  # type: ignore[assignment]
            try:
                super()._write_records(*args, **kwargs)
            finally:
                apply.index_needs = saved

    def opener(r: int) -> Store:
        return WithoutDeps(base / f"json-nodeps-{r}")

    yield opener, ""


@contextlib.contextmanager
def sqlite_kind(base: Path) -> Iterator[tuple[Opener | None, str]]:
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    def opener(r: int) -> Store:
        return SQLiteStore(base / f"sqlite-{r}.db")

    yield opener, ""


@contextlib.contextmanager
def postgres_kind(url: str) -> Iterator[tuple[Opener | None, str]]:
    try:
        import psycopg
        from psycopg.conninfo import make_conninfo
    except ImportError:
        yield None, "psycopg is not installed (pip install 'ledger_cli[postgres]')"
        return
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        yield None, f"not reachable at {url}: {first}"
        return
    from ledger_cli.stores.sql.postgres import PostgresStore

    prefix = f"ledger_bench_{uuid.uuid4().hex[:8]}"
    created: list[str] = []

    def opener(r: int) -> Store:
        schema = f"{prefix}_{r}"
        if schema not in created:
            admin.execute(f'CREATE SCHEMA "{schema}"')
            created.append(schema)
        return PostgresStore(make_conninfo(url, options=f"-c search_path={schema}"))

    try:
        yield opener, ""
    finally:
        for schema in created:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


def on_tmpfs(path: Path) -> bool:
    try:
        with open("/proc/mounts", encoding="utf-8") as fh:
            mounts = [line.split()[1:3] for line in fh]
    except OSError:
        return False
    best = ""
    fstype = ""
    resolved = str(path.resolve())
    for mount_point, kind in mounts:
        inside = (resolved + "/").startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) > len(best):
            best, fstype = mount_point, kind
    return fstype in ("tmpfs", "ramfs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the store files go")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("LEDGER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL),
    )
    parser.add_argument("--stores", default="json,sqlite,postgresql")
    parser.add_argument("--needs", type=int, default=0, help="needs per task (earlier tasks)")
    parser.add_argument("--per-admit", action="store_true", help="one batch per admit")
    parser.add_argument("--pruned", type=int, default=0, help="pruned records beside, re-admitted")
    parser.add_argument("--queue", default=None, help="every task in this queue")
    parser.add_argument("--priority", type=int, default=0, help="every task at this priority")
    args = parser.parse_args(argv)

    base = Path(tempfile.mkdtemp(prefix="ledger-bench-", dir=args.dir))
    if on_tmpfs(base):
        shutil.rmtree(base, ignore_errors=True)
        print(f"refusing {base.parent}: it is tmpfs, where fsync costs nothing", file=sys.stderr)
        return 2
    how = "one batch each" if args.per_admit else "in one batch"
    side = f", queue {args.queue}" if args.queue else ""
    side += f", priority {args.priority}" if args.priority else ""
    print(
        f"{args.tasks} admits {how} per round, {args.needs} needs each{side}, "
        f"{args.rounds} rounds; files in {base}"
    )
    results: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    try:
        with contextlib.ExitStack() as stack:
            kinds: dict[str, Opener] = {}
            makers: dict[str, Callable[[], Any]] = {
                "json": lambda: json_kind(base),
                "json-nodeps": lambda: json_nodeps_kind(base),
                "sqlite": lambda: sqlite_kind(base),
                "postgresql": lambda: postgres_kind(args.postgres_url),
            }
            for name in args.stores.split(","):
                cm = makers[name]()
                opener, reason = stack.enter_context(cm)
                if opener is None:
                    skipped[name] = reason
                else:
                    kinds[name] = opener
                    results[name] = []
            for r in range(args.rounds):
                for name, opener in kinds.items():
                    store = opener(r)
                    try:
                        seconds = admit_round(
                            store,
                            args.tasks,
                            args.needs,
                            args.per_admit,
                            args.queue,
                            args.priority,
                        )
                    finally:
                        store.close()
                    with contextlib.closing(opener(r)) as again:
                        stored = count(again)
                    if stored != args.tasks:
                        raise SystemExit(
                            f"{name}: {stored} records after the round, not {args.tasks}"
                        )
                    results[name].append(args.tasks / seconds)
                    if args.pruned:
                        with contextlib.closing(opener(args.rounds + r)) as store:
                            keys = with_pruned(store, args.pruned)
                        with contextlib.closing(opener(args.rounds + r)) as store:
                            seconds = readmit_round(store, args.tasks, keys)
                        rate = (args.tasks + args.pruned) / seconds
                        results.setdefault(f"{name}+pruned", []).append(rate)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    ref_name = "sqlite" if "sqlite" in results else next(iter(results), "")
    ref = statistics.median(results[ref_name]) if ref_name else 0.0
    print(f"{'store':<18}{'median tasks/s':>16}{'best tasks/s':>15}{'vs ' + ref_name:>13}")
    for name, rates in results.items():
        med = statistics.median(rates)
        print(f"{name:<18}{med:>16,.0f}{max(rates):>15,.0f}{med / ref:>12.2f}x")
    for name, reason in skipped.items():
        print(f"{name:<18}skipped: {reason}")
    if ref_name == "sqlite" and not args.needs and not args.per_admit:
        verdict = "meets" if ref >= TARGET_SQLITE else "misses"
        print(f"sqlite median {ref:,.0f} tasks/s {verdict} the target of {TARGET_SQLITE:,} tasks/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
