"""The ready index on every store (docs/design.md §6.1): what `claim --next` finds through
it must be what a brute-force evaluation of the Ready rule over `range()`
finds, after admits, completions, failures, takeovers, releases, retries,
cancels, prunes and restores;
rows the Go service writes with plain SQL are indexed too; `doctor` checks the
index and `doctor --fix` rebuilds it.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.cli.commands.claim import claim_next
from ledger_cli.cli.commands.stats import collect
from ledger_cli.cli.context import Session, Settings
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.prune import count_pruned
from ledger_cli.engine.ready import count_ready, is_ready, order_key, ready_iter
from ledger_cli.engine.store import Store
from ledger_cli.errors import LedgerError
from tests.cli_support import run_ledger
from tests.stores import KINDS, StoreKind

T0 = Instant.parse("2026-03-01T00:00:00Z")


def _at(seconds: float) -> Instant:
    return Instant.from_unix_ns(T0.unix_ns + int(seconds * 1e9), 0)


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return KINDS[str(request.param)]


@pytest.fixture
def places(kind: StoreKind, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two fresh locations of the kind: the store, and one to restore into."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with kind.place(tmp_path / "a") as first, kind.place(tmp_path / "b") as second:
        yield first, second


def brute(store: Store, now: Instant) -> list[str]:
    """The Ready rule evaluated over range(), in order: no index involved."""
    records = {r.key: r for r in store.range()}
    return [r.key for r in sorted(records.values(), key=order_key) if is_ready(r, records.get, now)]


def indexed(store: Store, now: Instant) -> list[str]:
    with store.batch():  # as claim --next reads it (a transaction on SQL stores)
        return [r.key for r in ready_iter(store, store.load, now)]


def _agree(store: Store, now: Instant, what: str) -> int:
    ready = brute(store, now)
    assert indexed(store, now) == ready, what
    # `ledger stats` counts them its own way (SQL stores: the pending ones
    # naming no needs in SQL): the same number, the same oldest one (the
    # smallest CreatedAt; of equals, the first in the Ready order).
    count, oldest, _ = count_ready(store, store.load, now)
    got = (count, None if oldest is None else oldest.key)
    records = {r.key: r for r in store.range()}
    first = min(ready, key=lambda k: records[k].created_at.unix_ns, default=None)
    assert got == (len(ready), first), what
    figures = collect(store, now)
    assert figures.ready == len(ready), what
    check = getattr(store, "check_ready_index", None)
    if check is not None:
        assert check() == [], what
    return len(ready)


def test_claim_next_agrees_with_the_ready_rule(kind: StoreKind, places: tuple[str, str]) -> None:
    place, other = places
    rng = random.Random(20260301)
    store = kind.open(place, lambda: T0)
    ledger = Ledger(store)
    keys = [f"t{i:02d}" for i in range(36)]
    admitted: list[str] = []
    fences: dict[str, int] = {}
    seen = {"ready": 0, "claimed next": 0, "completed": 0, "waiting": 0, "pruned": 0}
    seen |= {"retried": 0, "cancelled": 0}
    now = T0
    for step in range(160):
        now = _at(step * 0.5)
        op = rng.random()
        try:
            if op < 0.3 and len(admitted) < len(keys):
                key = keys[len(admitted)]
                # needs: earlier keys, and now and then a key not admitted yet
                pool = keys[: len(admitted) + 3]
                needs = rng.sample(pool, k=min(len(pool), rng.choice([0, 0, 1, 2])))
                needs = [n for n in needs if n != key]
                # ties in CreatedAt: several admits share an instant
                ledger.admit("t", key, 1, {"n": step}, _at((step // 3) * 1.5), *needs)
                admitted.append(key)
            elif op < 0.55 and admitted:
                key = rng.choice(admitted)
                fences[key] = ledger.claim(
                    "t", key, "w", timedelta(seconds=rng.choice([1, 30])), now
                )
            elif op < 0.75 and fences:
                key = rng.choice(sorted(fences))
                status = "failed" if rng.random() < 0.2 else "completed"
                ledger.complete("t", key, "w", fences.pop(key), status, now)
            elif op < 0.85 and admitted:
                key = rng.choice(admitted)
                fences[key] = ledger.takeover("t", key, "w2", timedelta(seconds=30), now)
            elif op < 0.88:
                ledger.prune(timedelta(seconds=rng.choice([0, 5])), now)
            elif op < 0.92 and fences:
                key = rng.choice(sorted(fences))
                ledger.release("t", key, "w", fences.pop(key), now)
            elif op < 0.95 and (failed := [r.key for r in store.range() if r.status == "failed"]):
                # retry: a failed record reopened, its dependents un-blocked
                key = rng.choice(failed)
                with store.batch():
                    ledger.retry("t", key, now, "again")
                seen["retried"] += 1
            elif op < 0.97 and admitted:
                # cancel: a live record failed without its lease, dependents blocked
                key = rng.choice(admitted)
                with store.batch():
                    ledger.cancel("t", key, now)
                fences.pop(key, None)
                seen["cancelled"] += 1
            else:
                # claim --next itself: the head of the index, claimed
                with Session(Settings(actor="t"), store=store) as s:
                    s.fixed_now = now
                    head = brute(store, now)
                    try:
                        rec, fence = claim_next(s, "n", "30s", None)
                    except LedgerError:
                        assert head == [], f"step {step}: nothing claimed, {head} ready"
                    else:
                        assert rec.key == head[0], f"step {step}"
                        fences[rec.key] = fence
                        seen["claimed next"] += 1
                store = kind.open(place, lambda: T0) if kind.durable else store
                ledger = Ledger(store)
        except LedgerError:
            pass  # a refused operation changes nothing the index cares about
        seen["ready"] += _agree(store, now, f"step {step}") > 0
    records = list(store.range())
    seen["completed"] = sum(r.status == "completed" for r in records)
    seen["pruned"] = count_pruned(store)
    seen["waiting"] = sum(
        r.status == "pending" and not is_ready(r, store.load, now) for r in records
    )
    assert all(seen.values()), seen  # the walk met every situation the index serves
    # Restore into a fresh store: the index is built from the restored rows.
    fresh = kind.open(other, lambda: T0)
    Ledger(fresh).restore(ledger.snapshot())
    _agree(fresh, now, "after restore")
    assert indexed(fresh, now) == indexed(store, now)


def test_rows_written_by_the_go_service_are_indexed(tmp_path: Path) -> None:
    """Plain SQL, as the Go SQLiteStore writes: inserts, and updates to completed."""
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    db = tmp_path / "go.db"
    store = SQLiteStore(db)
    go = sqlite3.connect(db)
    insert = (
        "INSERT INTO ledger_tasks (key, status, sequence, owner, fence, lease_until, needs,"
        " blocked_by, task, rev, created_at, updated_at, created_by, updated_by)"
        " VALUES (?, ?, 1, '', 0, '', ?, '', ?, 0, ?, ?, 'go', 'go')"
    )
    rows = [
        ("build", "pending", "[]", "2026-03-01T09:00:00.5+09:00"),  # 00:00:00.5Z
        ("test", "pending", '["build"]', "2026-03-01T00:00:00Z"),
        ("lint", "pending", "[]", "2026-03-01T00:00:00.000000001Z"),
        ("early", "pending", "[]", "2026-02-28T23:59:59.999999999-00:30"),  # 00:29:59.99…Z
        ("ship", "pending", '["test","lint"]', "2026-03-01T00:00:00Z"),
    ]
    for key, status, needs, created in rows:
        go.execute(insert, (key, status, needs, b"null", created, created))
        go.commit()
    now = Instant.parse("2026-03-01T01:00:00Z")
    assert indexed(store, now) == brute(store, now) == ["lint", "build", "early"]
    go.execute("UPDATE ledger_tasks SET status = 'completed', rev = rev + 1 WHERE key = 'build'")
    go.commit()
    assert indexed(store, now) == brute(store, now) == ["test", "lint", "early"]
    for key in ("test", "lint"):
        go.execute("UPDATE ledger_tasks SET status = 'completed' WHERE key = ?", (key,))
    go.commit()
    assert indexed(store, now) == brute(store, now) == ["ship", "early"]
    assert store.check_ready_index() == []
    go.close()


@pytest.mark.parametrize("scheme", ["json", "sqlite"])
def test_doctor_finds_a_damaged_index_and_fix_rebuilds_it(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:{tmp_path / ('s.db' if scheme == 'sqlite' else 'store')}"
    for key in ("a", "b", "c"):
        assert run_ledger(url, "admit", key).returncode == 0
    assert run_ledger(url, "admit", "d", "--needs", "a").returncode == 0
    assert run_ledger(url, "doctor").returncode == 0
    if scheme == "sqlite":
        conn = sqlite3.connect(tmp_path / "s.db")
        conn.execute("DELETE FROM ledger_ready WHERE key = 'b'")
        conn.execute("DELETE FROM ledger_needs WHERE key = 'd'")
        conn.commit()
        conn.close()
    else:
        for chunk in (tmp_path / "store" / "ready").glob("c*"):
            chunk.write_text("0\n")  # sound chunks listing no entries
    bad = run_ledger(url, "doctor")
    assert bad.returncode == 9, bad.stdout + bad.stderr
    assert "ready index" in bad.stdout + bad.stderr
    fixed = run_ledger(url, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "rebuilt the ready index" in fixed.stdout
    assert run_ledger(url, "doctor").returncode == 0
    out = run_ledger(url, "claim", "--next", "--owner", "w", "--lease", "1m")
    assert out.stdout.split()[0] == "a"


_WORKER = r"""
import subprocess, sys
cmd, url, log, total, name = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
drain = sys.argv[6:] == ["--drain"]  # one long-lived worker, else a process per task
child = (
    'python3 -c "import os,time;'
    "f=os.open(os.environ['LOG'],os.O_WRONLY|os.O_APPEND);"
    "os.write(f,('start %s %d\\n'%(os.environ['LEDGER_KEY'],time.monotonic_ns())).encode());"
    "time.sleep(0.02);"
    "os.write(f,('end %s %d\\n'%(os.environ['LEDGER_KEY'],time.monotonic_ns())).encode())\""
)
while True:
    rc = subprocess.run(
        [*cmd.split("\x1f"), "--store", url, "run", "--next", *sys.argv[6:], "--owner", name,
         "--lease", "60s", "--wait", "1s", "--", "sh", "-c", child],
        env={**__import__("os").environ, "LOG": log},
    ).returncode
    if rc == 7 or (drain and rc == 0):
        with open(log) as fh:
            if sum(line.startswith("end ") for line in fh) >= total:
                break
    elif rc != 0:
        sys.exit(rc)
"""


@pytest.mark.parametrize("mode", ["process per task", "--drain"])
@pytest.mark.parametrize("scheme", ["json", "sqlite", "postgresql"])
def test_eight_workers_drain_a_dag(scheme: str, mode: str, tmp_path: Path) -> None:
    """8 worker processes, each a loop of `ledger run --next` (a process per task)
    or of `ledger run --next --drain` (long-lived): no task runs twice, none
    before its needs."""
    import subprocess
    import sys

    from tests.cli_support import ledger_cmd, subprocess_env

    kind = KINDS[scheme]
    with kind.place(tmp_path) as location:
        url = kind.url(location)
        store = kind.open(location, lambda: T0)
        ledger = Ledger(store)
        rng = random.Random(8)
        needs: dict[str, list[str]] = {}
        with store.batch():
            for i in range(16):
                key = f"job-{i:02d}"
                earlier = sorted(needs)
                needs[key] = rng.sample(earlier, k=min(len(earlier), rng.choice([0, 1, 2])))
                ledger.admit("t", key, 1, None, _at(i % 5), *needs[key])
        store.close()
        log = tmp_path / "runs.log"
        log.touch()
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _WORKER,
                    "\x1f".join(ledger_cmd()),
                    url,
                    str(log),
                    str(len(needs)),
                    f"w{n}",
                    *(["--drain"] if mode == "--drain" else []),
                ],
                env=subprocess_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(8)
        ]
        for w in workers:
            _, err = w.communicate(timeout=600)
            assert w.returncode == 0, err
        events = [line.split() for line in log.read_text().splitlines()]
        starts = [key for what, key, _ in events if what == "start"]
        assert sorted(starts) == sorted(needs), "every task ran exactly once"
        at = {(what, key): int(t) for what, key, t in events}
        for key, its_needs in needs.items():
            for need in its_needs:
                assert at[("end", need)] < at[("start", key)], f"{key} ran before {need} ended"
        final = kind.open(location, lambda: T0)
        assert {r.status for r in final.range()} == {"completed"}
        final.close()


def test_postgres_claimers_skip_a_locked_candidate(tmp_path: Path) -> None:
    """While one claimer holds the oldest candidate (FOR UPDATE, in its claim's
    transaction), another `claim --next` takes the next one at once instead of
    waiting on the same row."""
    kind = KINDS["postgresql"]
    with kind.place(tmp_path) as location:
        store = kind.open(location, lambda: T0)
        ledger = Ledger(store)
        ledger.admit("t", "first", 1, None, _at(0))
        ledger.admit("t", "second", 1, None, _at(1))
        with store.batch():
            held = next(iter(store.ready_candidates()))  # type: ignore[attr-defined]
            assert held.key == "first"
            other = run_ledger(
                kind.url(location), "claim", "--next", "--owner", "b", "--lease", "1m", timeout=60
            )
            assert other.returncode == 0, other.stderr
            assert other.stdout.split()[0] == "second"
        store.close()


def test_a_rolled_back_completion_keeps_its_ready_entry(tmp_path: Path) -> None:
    """Ready candidates read inside a batch see its pending completion, but the
    task's entry stays in the index: rolled back, the task is claimable again
    (here by a takeover of its expired lease) and `doctor` finds nothing."""
    store = KINDS["json"].open(str(tmp_path / "s"), lambda: T0)
    ledger = Ledger(store)
    ledger.admit("a", "t", 1, None, T0)
    fence = ledger.claim("a", "t", "w", timedelta(seconds=1), T0)

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), store.batch():
        ledger.complete("a", "t", "w", fence, "completed", T0)
        assert [r.key for r in ready_iter(store, store.load, T0)] == []
        raise RolledBack
    assert store.check_ready_index() == []  # type: ignore[attr-defined]
    later = _at(2)
    assert [r.key for r in ready_iter(store, store.load, later)] == ["t"]


def test_a_batch_reads_ready_candidates_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside a batch holding the lock (claim --next), the first candidate costs
    one record read, not a page of them; outside one, a page is read under one
    hold. Candidates asked for after their batch ended are refused."""
    store = KINDS["json"].open(str(tmp_path / "s"), lambda: T0)
    ledger = Ledger(store)
    for i in range(6):
        ledger.admit("a", f"t{i}", 1, None, _at(i))
    reads: list[str] = []
    real = store._read_digest  # type: ignore[attr-defined]

    def counted(root_fd: int, digest: str) -> object:
        reads.append(digest)
        return real(root_fd, digest)

    monkeypatch.setattr(store, "_read_digest", counted)
    with store.batch():
        ledger.admit("a", "x", 1, None, T0)  # a write: the batch holds the lock from here
        reads.clear()
        candidates = store.ready_candidates(_at(10))  # type: ignore[attr-defined]
        assert next(candidates).key == "t0"
        assert len(reads) == 1
    with pytest.raises(RuntimeError, match="after their batch ended"):
        next(candidates)
    reads.clear()
    assert next(store.ready_candidates(_at(10))).key == "t0"  # type: ignore[attr-defined]
    assert len(reads) == 7  # the page, read under one hold
