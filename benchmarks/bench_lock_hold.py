"""The longest write-lock hold of `ledger admit --batch`, `restore`, and of the
long walks (`complete --failed`, `retry`, `cancel`, `doctor --fix`, `prune`),
on the JSON, SQLite and PostgreSQL stores (docs/design.md §5.4 "Short lock holds").

    .venv/bin/python benchmarks/bench_lock_hold.py [--tasks N] [--dir DIR]
        [--postgres-url URL] [--stores json,sqlite,postgresql]
        [--commands batch,walks|prune,rebuild]

`batch`, for each store: `ledger admit --batch FILE` of N lines (default
200,000) into an empty store, then `ledger restore` of that store's N-record
snapshot into another empty store, each a real `ledger` process. Side by
side, the same N admits in ONE `store.batch()` through the library (what
`admit --batch` did before it committed in blocks) shows what the blocks buy.

`walks`, for each store, on a store restored from a snapshot of a root
claimed by `w` (fence 1) and N pending dependents needing it: `complete root
--failed` (blocks N), `retry root` (un-blocks N), `cancel root` (blocks N),
then, after the root is set pending by one library compare-and-swap (N
orphaned blocks), `doctor --fix` (un-blocks N); and `prune --older-than 1h`
of another store restored with N completed records a day old (`--commands
prune`: the prune alone). `rebuild`: on a store of N ready tasks whose ready
index lost every entry (SQL: its rows; JSON: its chunks' contents), `doctor
--fix` rebuilding it. The setup's restores are not measured.

While a command runs, a probe measures how long the store's write lock stays
held by someone else:
- SQLite: a second connection loops `BEGIN IMMEDIATE` (a write lock) on a
  probe table with a long busy timeout and records the longest wait: a writer
  that arrives just after the lock was taken waits one whole hold;
- JSON: a second `JsonFileStore` loops an empty `batch()`, which takes the
  store's lock, and records the longest wait;
- PostgreSQL: row locks do not block writers of other rows, so the probe
  polls `pg_stat_activity` and `pg_locks` every few ms for the command's open
  transactions (found by an application_name unique to the run). A
  transaction holds write locks from the first poll that sees it writing (a
  transaction id: a row written or locked FOR UPDATE; a table lock stronger
  than ROW SHARE, as LOCK TABLE takes; an advisory lock, as the block
  writers' lock) to its end: the longest such span is the longest hold.
  Beside it (`any open transaction`) the longest age of any transaction of
  the command, a read-only statement included: a read blocks no writer.
The probe's own hold is nothing (it commits at once). Prints, per store and
command: wall time, longest hold, the ratio of the one-batch hold to the
chunked one, and the chunked wall time against the one batch's. Target:
every chunked hold under 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_POSTGRES_URL = "postgresql://ledger:ledger@127.0.0.1:5432/ledger_test"
TARGET = 1.0


class Probe:
    """Runs `wait_once()` in a loop on a thread; keeps the longest result."""

    def __init__(self, wait_once: Callable[[], float], pause: float = 0.002) -> None:
        self.wait_once = wait_once
        self._pause = pause
        self._stop = threading.Event()
        self.longest = 0.0
        self.samples = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.longest = max(self.longest, self.wait_once())
            self.samples += 1
            time.sleep(self._pause)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def sqlite_probe(path: Path) -> Callable[[], float]:
    conn = sqlite3.connect(path, timeout=120, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=120000")
    conn.execute("CREATE TABLE IF NOT EXISTS bench_probe (n INTEGER)")

    def once() -> float:
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        waited = time.perf_counter() - started
        conn.execute("COMMIT")
        return waited

    return once


def json_probe(path: Path) -> Callable[[], float]:
    from ledger_cli.stores.jsonfile import JsonFileStore

    store = JsonFileStore(path)

    def once() -> float:
        started = time.perf_counter()
        with store.batch():
            waited = time.perf_counter() - started
        return waited

    return once


APP = f"ledger_hold_{uuid.uuid4().hex[:8]}"
"""The application_name of this run's ledger connections (set in their URL), so
the probe never counts another program's transactions on a shared server."""


_PG_POLL = """
SELECT a.pid, a.xact_start, extract(epoch FROM clock_timestamp() - a.xact_start),
       a.backend_xid IS NOT NULL OR EXISTS (
           SELECT 1 FROM pg_locks l
           WHERE l.pid = a.pid AND l.granted AND (
               l.locktype = 'advisory'
               OR (l.locktype = 'relation'
                   AND l.mode NOT IN ('AccessShareLock', 'RowShareLock')))),
       left(a.query, 100)
FROM pg_stat_activity a
WHERE a.application_name = %s AND a.xact_start IS NOT NULL AND a.state <> 'idle'
"""


class PostgresProbe:
    """`once()` polls the command's open transactions (see the module's note) and
    returns the longest write hold seen so far; `longest_any` is the longest age
    of any open transaction, reads included, and `what` the statement of each."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self._writing: dict[tuple[int, Any], tuple[float, float]] = {}
        self.longest_any = 0.0
        self.longest_write = 0.0
        self.any_what = ""
        self.write_what = ""

    def once(self) -> float:
        for pid, started, age, writing, query in self._conn.execute(_PG_POLL, (APP,)).fetchall():
            age = float(age)
            if age > self.longest_any:
                self.longest_any, self.any_what = age, query
            if writing or (pid, started) in self._writing:
                first, _ = self._writing.get((pid, started), (age, age))
                self._writing[(pid, started)] = (first, age)
                if age - first > self.longest_write:
                    self.longest_write, self.write_what = age - first, query
        return self.longest_write


def postgres_probe(url: str) -> Callable[[], float]:
    return PostgresProbe(url).once


def ledger(store: str, *args: str, stdin: bytes | None = None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["PYTHONPATH"] = str(ROOT)
    started = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "ledger_cli", "--store", store, "--actor", "bench", *args],
        input=stdin,
        capture_output=True,
        env=env,
        check=False,
    )
    if res.returncode != 0:
        raise SystemExit(
            f"ledger {' '.join(args)} on {store}: exit {res.returncode}: "
            f"{res.stderr.decode(errors='replace')[:500]}"
        )
    return time.perf_counter() - started


WALKS = ("complete --failed", "retry", "cancel", "doctor --fix", "prune")
REBUILD = "ready rebuild"
"""`doctor --fix` rebuilding the ready index (`--commands rebuild`)."""


def snapshot_file(path: Path, tasks: int, kind: str) -> Path:
    """A snapshot: `walk` (root claimed by w, fence 1; N pending dependents of
    it), `ready` (N pending tasks naming no need: all ready) or `prune` (N
    records completed a day ago)."""
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.record import TaskState
    from ledger_cli.engine.snapshot import Snapshot

    now = Instant.now()
    old = Instant.from_unix_ns(now.unix_ns - 86_400 * 10**9, 0)
    recs: list[TaskState] = []
    if kind == "walk":
        lease = Instant.from_unix_ns(now.unix_ns + 86_400 * 10**9, 0)
        recs.append(
            TaskState(key="root", status="claimed", sequence=1, owner="w", fence=1,
                      lease_until=lease, created_at=now, updated_at=now)
        )  # fmt: skip
        status, needs, at = "pending", ("root",), now
    elif kind == "ready":
        status, needs, at = "pending", None, now
    else:
        status, needs, at = "completed", None, old
    for i in range(tasks):
        recs.append(
            TaskState(key=f"dep-{i:07d}", status=status, sequence=1, needs=needs,
                      task={"n": i}, created_at=at, updated_at=at)
        )  # fmt: skip
    recs.sort(key=lambda r: r.key.encode())
    path.write_bytes(Snapshot(tuple(recs)).encode())
    return path


def orphan_the_root(store: Any) -> None:
    """Set the cancelled root pending by one compare-and-swap: its N blocked
    dependents become orphaned blocks, for `doctor --fix` to un-block."""
    try:
        cur = store.load("root")
        assert cur is not None and cur.status == "failed", cur
        store.compare_and_swap("root", cur, cur.replace(status="pending"))
    finally:
        store.close()


def measure_walks(
    kind: Kind, place: Callable[[str], str], base: Path, tasks: int, *, walks: bool = True
) -> dict[str, Any]:
    """The four walks on one store (`walks`), then prune on another."""
    out: dict[str, Any] = {}
    steps: list[tuple[str, tuple[str, ...]]] = (
        []
        if not walks
        else [
            ("complete --failed", ("complete", "root", "--owner", "w", "--fence", "1", "--failed")),
            ("retry", ("retry", "root")),
            ("cancel", ("cancel", "root")),
            ("doctor --fix", ("doctor", "--fix")),
        ]
    )
    w = place("walks") if steps else ""
    if steps:
        walk = snapshot_file(base / "walk-snapshot.json", tasks, "walk")
        kind.prepare(w)
        ledger(kind.url(w), "restore", str(walk))
    for label, argv in steps:
        if label == "doctor --fix":
            orphan_the_root(kind.opener(w))
        with Probe(kind.probe(w)) as probe:
            out[f"{label}_wall"] = ledger(kind.url(w), *argv)
        out[f"{label}_hold"] = probe.longest
        print(f"    {kind.name} {label}: {out[f'{label}_wall']:.1f} s wall, "
              f"{probe.longest:.3f} s longest hold{_reads(probe, out, label)}",
              flush=True)  # fmt: skip
    p = place("prune")
    kind.prepare(p)
    ledger(kind.url(p), "restore", str(snapshot_file(base / "prune-snapshot.json", tasks, "prune")))
    with Probe(kind.probe(p)) as probe:
        out["prune_wall"] = ledger(kind.url(p), "prune", "--older-than", "1h")
    out["prune_hold"] = probe.longest
    print(f"    {kind.name} prune: {out['prune_wall']:.1f} s wall, "
          f"{probe.longest:.3f} s longest hold{_reads(probe, out, 'prune')}",
          flush=True)  # fmt: skip
    if kind.name == "json":
        out.update(history_rewrite(base, tasks))
    return out


def damage_ready_index(store: Any) -> None:
    """Lose every entry of the ready index (SQL: its rows; JSON: its chunks'
    contents): `ledger doctor` then finds every task missing from it, and
    `--fix` rebuilds it."""
    try:
        if hasattr(store, "_conn"):
            with store.batch():
                store._conn.execute("DELETE FROM ledger_ready")
        else:
            for chunk in (Path(store._root) / "ready").glob("c*"):
                chunk.write_text("")
    finally:
        store.close()


def measure_rebuild(
    kind: Kind, place: Callable[[str], str], base: Path, tasks: int
) -> dict[str, Any]:
    """`doctor --fix` rebuilding the ready index of a store of N ready tasks
    after damage_ready_index."""
    w = place("rebuild")
    kind.prepare(w)
    ledger(kind.url(w), "restore", str(snapshot_file(base / "ready-snapshot.json", tasks, "ready")))
    damage_ready_index(kind.opener(w))
    with Probe(kind.probe(w)) as probe:
        wall = ledger(kind.url(w), "doctor", "--fix")
    out = {f"{REBUILD}_wall": wall, f"{REBUILD}_hold": probe.longest}
    print(f"    {kind.name} doctor --fix ({REBUILD}): {wall:.1f} s wall, "
          f"{probe.longest:.3f} s longest hold{_reads(probe, out, REBUILD)}",
          flush=True)  # fmt: skip
    return out


_REWRITE = """
import sys
from ledger_cli.stores.jsonfile import JsonFileStore, historyrewrite
root, how = sys.argv[1], sys.argv[2]
store = JsonFileStore(root)
keys = {f"dep-{i:07d}" for i in range(0, int(sys.argv[3]), 2)}
if how == "one":
    with store._locked(create=False) as root_fd:
        historyrewrite.drop_keys(root, root_fd, keys)
else:
    historyrewrite.drop_keys_briefly(root, lambda: store._locked(create=False), keys)
"""


def history_rewrite(base: Path, tasks: int) -> dict[str, Any]:
    """JSON only, side by side: the history rewrite of a prune (half of N
    history lines dropped) under one hold, as before, and with short holds."""
    from ledger_cli.engine.history import HistoryEntry
    from ledger_cli.engine.instant import Instant
    from ledger_cli.stores.jsonfile import JsonFileStore

    src = base / "json-history"
    store = JsonFileStore(src)
    when = str(Instant.now())
    for at in range(0, tasks, 20_000):
        store.append_history(
            [
                HistoryEntry(when, "bench", "ledger.restored", f"dep-{i:07d}", 0,
                             f"key dep-{i:07d} restored from a snapshot")
                for i in range(at, min(tasks, at + 20_000))
            ]
        )  # fmt: skip
    store.close()
    out: dict[str, Any] = {}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for how in ("one", "short"):
        root = base / f"json-history-{how}"
        shutil.copytree(src, root)
        with Probe(json_probe(root)) as probe:
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", _REWRITE, str(root), how, str(tasks)], env=env, check=True
            )
            out[f"history_{how}_wall"] = time.perf_counter() - started
        out[f"history_{how}_hold"] = probe.longest
        shutil.rmtree(root)
        print(f"    json history rewrite ({how} hold{'s' if how == 'short' else ''}): "
              f"{out[f'history_{how}_wall']:.1f} s wall, {probe.longest:.3f} s longest hold",
              flush=True)  # fmt: skip
    shutil.rmtree(src)
    return out


def _reads(probe: Probe, out: dict[str, Any], label: str) -> str:
    """For PostgreSQL: the longest open transaction, reads included, and what
    the longest hold and that transaction were running (the last statement)."""
    pg = getattr(probe.wait_once, "__self__", None)
    if not isinstance(pg, PostgresProbe):
        return ""
    out[f"{label}_any"] = pg.longest_any
    return (
        f" (longest open transaction, reads included, {pg.longest_any:.3f} s: {pg.any_what!r};"
        f" the longest hold's: {pg.write_what!r})"
    )


def one_batch(open_store: Callable[[], Any], tasks: int) -> float:
    """What `admit --batch` did before: every admit in one store.batch()."""
    from ledger_cli.engine.instant import Instant
    from ledger_cli.engine.ledger import Ledger

    store = open_store()
    try:
        led = Ledger(store)
        now = Instant.now()
        started = time.perf_counter()
        with store.batch():
            for i in range(tasks):
                led.admit("bench", f"one-{i:07d}", 1, {"n": i}, now)
        return time.perf_counter() - started
    finally:
        store.close()


class Kind:
    def __init__(
        self,
        name: str,
        url: Callable[[str], str],
        probe: Callable[[str], Callable[[], float]],
        opener: Callable[[str], Any],
        prepare: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.name = name
        self.url = url
        self.probe = probe
        self.opener = opener
        self.prepare = prepare


def measure(kind: Kind, place: Callable[[str], str], batch: Path, tasks: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # admit --batch, chunked
    a = place("admit")
    kind.prepare(a)
    with Probe(kind.probe(a)) as probe:
        out["admit_wall"] = ledger(kind.url(a), "admit", "--batch", str(batch))
    out["admit_hold"] = probe.longest
    # restore of that store's snapshot, chunked
    snap = batch.with_name(f"{kind.name}-snapshot.json")
    ledger(kind.url(a), "snapshot", "-o", str(snap))
    r = place("restore")
    kind.prepare(r)
    with Probe(kind.probe(r)) as probe:
        out["restore_wall"] = ledger(kind.url(r), "restore", str(snap))
    out["restore_hold"] = probe.longest
    # the same admits in one batch (the old way), side by side
    o = place("one")
    kind.prepare(o)
    with Probe(kind.probe(o)) as probe:
        out["one_wall"] = one_batch(lambda: kind.opener(o), tasks)
    out["one_hold"] = probe.longest
    return out


@contextlib.contextmanager
def postgres_places(url: str) -> Iterator[Callable[[str], str] | None]:
    try:
        import psycopg
    except ImportError:
        yield None
        return
    try:
        admin = psycopg.connect(url, autocommit=True, connect_timeout=3)
    except psycopg.Error:
        yield None
        return
    from urllib.parse import quote

    prefix = f"ledger_hold_{uuid.uuid4().hex[:8]}"
    made: list[str] = []

    def place(name: str) -> str:
        schema = f"{prefix}_{name}"
        admin.execute(f'CREATE SCHEMA "{schema}"')
        made.append(schema)
        sep = "&" if "?" in url else "?"
        return f"{url}{sep}options={quote(f'-c search_path={schema}')}&application_name={APP}"

    try:
        yield place
    finally:
        for schema in made:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        admin.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--postgres-url", default=os.environ.get("LEDGER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    )
    parser.add_argument("--stores", default="json,sqlite,postgresql")
    parser.add_argument("--commands", default="batch,walks")
    args = parser.parse_args(argv)
    wanted = args.stores.split(",")
    commands = args.commands.split(",")

    def run(kind: Kind, place: Callable[[str], str]) -> dict[str, Any]:
        r: dict[str, Any] = {}
        if "batch" in commands:
            r.update(measure(kind, place, batch, args.tasks))
        if "walks" in commands or "prune" in commands:
            r.update(measure_walks(kind, place, base, args.tasks, walks="walks" in commands))
        if "rebuild" in commands:
            r.update(measure_rebuild(kind, place, base, args.tasks))
        return r

    base = Path(tempfile.mkdtemp(prefix="ledger-hold-", dir=args.dir))
    batch = base / "batch.jsonl"
    with open(batch, "w", encoding="utf-8") as fh:
        for i in range(args.tasks):
            fh.write(json.dumps({"key": f"task-{i:07d}", "task": {"n": i}}) + "\n")
    size = batch.stat().st_size
    print(f"{args.tasks} lines ({size / 1e6:.1f} MB) per command; files in {base}")

    from ledger_cli.stores.jsonfile import JsonFileStore
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    try:
        with contextlib.ExitStack() as stack:
            if "json" in wanted:
                kind = Kind(
                    "json",
                    lambda p: f"json:{p}",
                    lambda p: json_probe(Path(p)),
                    JsonFileStore,
                    prepare=lambda p: JsonFileStore(p).close(),
                )
                results["json"] = run(kind, lambda n: str(base / f"json-{n}"))
                print(f"  json done: {results['json']}", flush=True)
            if "sqlite" in wanted:
                kind = Kind(
                    "sqlite",
                    lambda p: f"sqlite:{p}",
                    lambda p: sqlite_probe(Path(p)),
                    SQLiteStore,
                    prepare=lambda p: SQLiteStore(p).close(),
                )
                results["sqlite"] = run(kind, lambda n: str(base / f"sqlite-{n}.db"))
                print(f"  sqlite done: {results['sqlite']}", flush=True)
            if "postgresql" in wanted:
                place = stack.enter_context(postgres_places(args.postgres_url))
                if place is None:
                    skipped["postgresql"] = f"not reachable at {args.postgres_url}"
                else:
                    from ledger_cli.stores.sql.postgres import PostgresStore

                    kind = Kind(
                        "postgresql",
                        lambda p: p,
                        lambda p: postgres_probe(args.postgres_url),
                        PostgresStore,
                        prepare=lambda p: PostgresStore(p).close(),
                    )
                    results["postgresql"] = run(kind, place)
                    print(f"  postgresql done: {results['postgresql']}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print()
    print(
        f"{'store':<12}{'command':<22}{'wall s':>9}{'longest hold s':>16}{'one batch / this':>18}"
        f"{'wall / one batch':>18}{'open txn s':>12}"
    )
    worst = 0.0
    for name, r in results.items():
        rows = []
        if "admit_wall" in r:
            rows += [
                ("admit --batch", r["admit_wall"], r["admit_hold"]),
                ("restore", r["restore_wall"], r["restore_hold"]),
                ("one batch (before)", r["one_wall"], r["one_hold"]),
            ]
        rows += [
            (label, r[f"{label}_wall"], r[f"{label}_hold"])
            for label in (*WALKS, REBUILD)
            if f"{label}_wall" in r
        ]
        if "history_one_wall" in r:
            rows += [
                ("history, one hold", r["history_one_wall"], r["history_one_hold"]),
                ("history, short holds", r["history_short_wall"], r["history_short_hold"]),
            ]
        for label, wall, hold in rows:
            compared = "admit_wall" in r and label in ("admit --batch", "restore")
            ratio = r["one_hold"] / hold if compared and hold > 0 else float("inf")
            shown = f"{ratio:>17.1f}x" if compared else ""
            slower = f"{wall / r['one_wall']:>17.1f}x" if compared else ""
            if label == "history, short holds":  # against the one hold, side by side
                ratio = r["history_one_hold"] / hold if hold > 0 else float("inf")
                shown = f"{ratio:>17.1f}x"
                slower = f"{wall / r['history_one_wall']:>17.1f}x"
            any_txn = r.get(f"{label}_any")
            txn = "" if any_txn is None else f"{any_txn:>12.3f}"
            print(f"{name:<12}{label:<22}{wall:>9.2f}{hold:>16.3f}{shown:>18}{slower:>18}{txn}")
            if not label.startswith("one") and label != "history, one hold":
                worst = max(worst, hold)
    for name, reason in skipped.items():
        print(f"{name:<12}skipped: {reason}")
    if any(k.endswith("_any") for r in results.values() for k in r):
        print("open txn: PostgreSQL's longest open transaction, read-only statements included")
    verdict = "ok" if worst < TARGET else "OVER"
    print(f"longest chunked hold {worst:.3f} s (target < {TARGET:g} s): {verdict}")
    return 0 if worst < TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
