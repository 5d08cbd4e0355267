"""Admission throughput in one batch: the JSON, SQLite and PostgreSQL stores side by side.

    .venv/bin/python benchmarks/bench_admit_batch.py [--tasks N] [--rounds N]
        [--dir DIR] [--postgres-url URL]

Each round admits N tasks (default 10,000) through `Ledger.admit` inside one
`store.batch()` on a fresh, empty store of each kind, stores interleaved round
by round so load on the machine hits them alike. The time counted runs from
the first admit to the return of the batch, whose commit makes every task
durable (the JSON store: fsynced files and directory; SQLite: one transaction
committed with synchronous=FULL, i.e. the WAL fsynced; PostgreSQL: one
transaction committed with the server's synchronous_commit, on by default).
After each round the store is reopened and the count of records checked.

Prints each store's median and best tasks/s, and the ratio of each median to
SQLite's. The issue's target: SQLite >= 20,000 tasks/s.

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


def admit_round(store: Store, tasks: int) -> float:
    ledger = Ledger(store)
    now = Instant.now()
    started = time.perf_counter()
    with store.batch():
        for i in range(tasks):
            ledger.admit("bench", f"task-{i:06d}", 1, payload(i), now)
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
def sqlite_kind(base: Path) -> Iterator[tuple[Opener | None, str]]:
    from ledger_cli.stores.sqlite import SQLiteStore

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
    from ledger_cli.stores.postgres import PostgresStore

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
    args = parser.parse_args(argv)

    base = Path(tempfile.mkdtemp(prefix="ledger-bench-", dir=args.dir))
    if on_tmpfs(base):
        shutil.rmtree(base, ignore_errors=True)
        print(f"refusing {base.parent}: it is tmpfs, where fsync costs nothing", file=sys.stderr)
        return 2
    print(f"{args.tasks} admits in one batch per round, {args.rounds} rounds; files in {base}")
    results: dict[str, list[float]] = {}
    skipped: dict[str, str] = {}
    try:
        with contextlib.ExitStack() as stack:
            kinds: dict[str, Opener] = {}
            for name, cm in (
                ("json", json_kind(base)),
                ("sqlite", sqlite_kind(base)),
                ("postgresql", postgres_kind(args.postgres_url)),
            ):
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
                        seconds = admit_round(store, args.tasks)
                    finally:
                        store.close()
                    with contextlib.closing(opener(r)) as again:
                        stored = count(again)
                    if stored != args.tasks:
                        raise SystemExit(
                            f"{name}: {stored} records after the round, not {args.tasks}"
                        )
                    results[name].append(args.tasks / seconds)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    ref = statistics.median(results["sqlite"])
    print(f"{'store':<12}{'median tasks/s':>16}{'best tasks/s':>15}{'vs sqlite':>11}")
    for name, rates in results.items():
        med = statistics.median(rates)
        print(f"{name:<12}{med:>16,.0f}{max(rates):>15,.0f}{med / ref:>10.2f}x")
    for name, reason in skipped.items():
        print(f"{name:<12}skipped: {reason}")
    verdict = "meets" if ref >= TARGET_SQLITE else "misses"
    print(f"sqlite median {ref:,.0f} tasks/s {verdict} the target of {TARGET_SQLITE:,} tasks/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
