"""The long walks commit in short blocks (docs/design.md §5.4 "Short lock
holds"): `complete --failed`, `retry`, `cancel`, `doctor --fix` and `prune`
over a root with N dependents, on the JSON, SQLite and PostgreSQL stores.

No timing assertion: the command runs in this process over a store that
counts its writes per outermost transaction (a `store.batch()`, or a
compare-and-swap outside one), and the test checks that
- the head write (the failure, the reopen) commits in a transaction of its
  own, before any dependent is written;
- the N dependents' writes are spread over several transactions, none
  holding most of them (one transaction held all N + 1 before), and every
  prune call of the store gets at most `prune.CHUNK` records;
- between two blocks of a cancel no dependent of the failure is ready for
  `claim --next`, and a claim by key is refused and blocks it (the claim walk);
- the results are exact: every dependent blocked (or un-blocked), the JSON
  lists complete, one history line per dependent.
`benchmarks/bench_lock_hold.py` measures the holds themselves at 200,000.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.prune import CHUNK
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.store import Store
from ledger_cli.errors import NotClaimedError
from tests.faults_support import invoke
from tests.stores import KINDS

N = 2400
NOW = "2026-01-02T03:04:05Z"
LATER = "2026-01-09T03:04:05Z"
HOUR = timedelta(hours=1)
DEPS = [f"dep-{i:05d}" for i in range(N)]


class Counting:
    """A store that counts the successful compare-and-swaps of each outermost
    transaction (`txns`), calls `between()` before every outermost batch but
    the first, and records the size of each `prune_records` call, and whether
    the garbage collector was on inside each outermost batch (`collecting`: a
    collection inside a block holds the lock, engine/collector.py; prune's own
    transactions: tests/storage/test_store_collector.py)."""

    def __init__(self, store: Store, between: Callable[[], None] = lambda: None) -> None:
        self._store = store
        self._between = between
        self._depth = 0
        self._writes = 0
        self.txns: list[int] = []
        self.prunes: list[int] = []
        self.collecting: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        outer = self._depth == 0
        if outer:
            if self.txns:
                self._between()
            self._writes = 0
        self._depth += 1
        try:
            with self._store.batch():
                if outer:
                    self.collecting.append(gc.isenabled())
                yield
        finally:
            self._depth -= 1
        if outer:
            self.txns.append(self._writes)

    def compare_and_swap(self, key: str, old: TaskState | None, new: TaskState) -> bool:
        ok = self._store.compare_and_swap(key, old, new)
        if ok and self._depth:
            self._writes += 1
        elif ok:
            self.txns.append(1)
        return ok

    def prune_records(self, pairs: Any, **how: Any) -> int:
        self.prunes.append(len(pairs))
        return int(self._store.prune_records(pairs, **how))

    def close(self) -> None:
        self._store.close()


@pytest.fixture(params=["json", "sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        yield request.param, location


def _open(kind: str, location: str) -> Store:
    return KINDS[kind].open(location, Instant.now)


def _seed(store: Store) -> None:
    """root claimed by w (fence 1), N pending dependents needing it."""
    led = Ledger(store)
    now = Instant.parse(NOW)
    with store.batch():
        led.admit("seed", "root", 1, None, now)
        for key in DEPS:
            led.admit("seed", key, 1, {"k": key}, now, "root")
    led.claim("seed", "root", "w", HOUR, now)


def _spread(txns: list[int], head: bool) -> None:
    """The walk's N writes in several transactions, none with most of them;
    with `head`, the head write alone in the first."""
    assert sum(txns) >= N, txns
    if head:
        assert txns[0] == 1, f"the head write shares its transaction: {txns[:5]}"
    assert len([t for t in txns if t]) >= 3, txns
    assert max(txns) <= N * 3 // 4, f"one transaction wrote {max(txns)} of {N}: {txns}"


def _collector_paused(c: Counting) -> None:
    """No garbage collection in any block; the collector on again after."""
    assert c.collecting and not any(c.collecting), c.collecting
    assert gc.isenabled()


def _run(
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    location: str,
    *argv: str,
    between: Callable[[], None] = lambda: None,
    now: str = NOW,
) -> tuple[Counting, Any]:
    counting = Counting(_open(kind, location), between)
    monkeypatch.setattr(
        "ledger_cli.cli.context.open_store", lambda url, create=True, existing=False: counting
    )
    res = invoke(KINDS[kind].url(location), "--json", *argv, now=now)
    assert res.code == 0, (argv, res.stdout, res.stderr)
    return counting, json.loads(res.stdout.splitlines()[-1])


def _statuses(kind: str, location: str) -> dict[str, str]:
    store = _open(kind, location)
    try:
        return {r.key: r.status for r in store.range()}
    finally:
        store.close()


def test_every_long_walk_commits_in_blocks(
    place: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kind, location = place
    store = _open(kind, location)
    _seed(store)
    store.close()

    # complete --failed: the completion alone, then the blocks in blocks.
    c, _ = _run(monkeypatch, kind, location, "complete", "root", "--owner", "w", "--fence", "1",
                "--failed")  # fmt: skip
    _spread(c.txns, head=True)
    _collector_paused(c)
    st = _statuses(kind, location)
    assert st["root"] == "failed" and all(st[k] == "blocked" for k in DEPS)

    # retry: the reopen alone, then the un-blocks; the JSON list is whole.
    c, out = _run(monkeypatch, kind, location, "retry", "root")
    _spread(c.txns, head=True)
    _collector_paused(c)
    assert out["unblocked"] == DEPS
    st = _statuses(kind, location)
    assert st["root"] == "pending" and all(st[k] == "pending" for k in DEPS)

    # cancel: between its blocks, nothing behind the failure is claimable.
    checks: list[int] = []

    def nothing_claimable() -> None:
        other = _open(kind, location)
        try:
            from ledger_cli.engine.ready import ready_iter

            handed = [r.key for r in ready_iter(other, other.load, Instant.parse(NOW))]
            assert [k for k in handed if k in set(DEPS)] == [], handed[:5]
            led = Ledger(other)
            waiting = [k for k in reversed(DEPS) if (r := other.load(k)) and r.status == "pending"]
            if waiting and not checks:  # a claim by key: refused, and it blocks the record
                with pytest.raises(NotClaimedError):  # Go's refusal
                    led.claim("probe", waiting[0], "p", HOUR, Instant.parse(NOW))
                rec = other.load(waiting[0])
                assert rec is not None and rec.status == "blocked", rec
            checks.append(len(waiting))
        finally:
            other.close()

    c, out = _run(monkeypatch, kind, location, "cancel", "root", between=nothing_claimable)
    cancel_blocked = len(out["blocked"])
    _spread(c.txns, head=True)
    _collector_paused(c)
    assert any(checks), f"no check saw the cancel half done: {checks}"
    # The record the probe's claim blocked is not in the cancel's list: it
    # blocked it first. Every other dependent is.
    assert len(out["blocked"]) in (N, N - 1) and out["blocked"] == sorted(out["blocked"])
    st = _statuses(kind, location)
    assert st["root"] == "failed" and all(st[k] == "blocked" for k in DEPS)

    # doctor --fix: N orphaned blocks (the root set pending behind the ledger's back).
    store = _open(kind, location)
    root = store.load("root")
    assert root is not None
    assert store.compare_and_swap("root", root, root.replace(status="pending"))
    store.close()
    c, out = _run(monkeypatch, kind, location, "doctor", "--fix")
    _spread(c.txns, head=False)
    _collector_paused(c)
    assert len([f for f in out["fixed"] if f.startswith("un-blocked ")]) == N
    st = _statuses(kind, location)
    assert all(st[k] == "pending" for k in DEPS)

    # One history line per dependent each walk wrote (the probe's library claim keeps none).
    store = _open(kind, location)
    try:
        history = list(getattr(store, "read_history")())  # noqa: B009
    finally:
        store.close()
    blocked = sum(e.event == "ledger.blocked" for e in history)
    unblocked = sum(e.event == "ledger.unblocked" for e in history)
    assert blocked == N + cancel_blocked and unblocked == 2 * N, (blocked, unblocked)


def test_prune_paces_the_store_in_short_calls(
    place: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kind, location = place
    store = _open(kind, location)
    led = Ledger(store)
    now = Instant.parse(NOW)
    with store.batch():
        for key in DEPS:
            led.admit("seed", key, 1, None, now)
    for key in DEPS:
        led.claim("seed", key, "w", HOUR, now)
        led.complete("seed", key, "w", 1, "completed", now)
    store.close()
    c, out = _run(monkeypatch, kind, location, "prune", "--older-than", "1h", now=LATER)
    assert out == {"pruned": N, "dry_run": False}
    assert len(c.prunes) >= 3 and max(c.prunes) <= min(CHUNK, N * 3 // 4), c.prunes


def test_json_dependents_walk_reads_in_short_lock_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON store's `dependents` hook, outside a batch, releases its lock
    after every READS_PER_HOLD files (200,000 dependents read in one hold held
    it 36 s); the walk still finds every dependent, two levels deep."""
    from ledger_cli.engine.dependents import dependents_walk
    from ledger_cli.stores.jsonfile import JsonFileStore, depsview

    store = JsonFileStore(tmp_path / "store")
    led = Ledger(store)
    now = Instant.parse(NOW)
    with store.batch():
        led.admit("seed", "root", 1, None, now)
        for i in range(300):
            led.admit("seed", f"d{i:03d}", 1, None, now, "root")
        for i in range(0, 300, 3):
            led.admit("seed", f"e{i:03d}", 1, None, now, f"d{i:03d}")
    monkeypatch.setattr(depsview, "READS_PER_HOLD", 16)
    holds: list[int] = []
    locked = store._locked

    def counted(*args: Any, **kwargs: Any) -> Any:
        holds.append(1)
        return locked(*args, **kwargs)

    monkeypatch.setattr(store, "_locked", counted)
    found = dependents_walk(store, ["root"])
    assert sorted(found) == sorted([f"d{i:03d}" for i in range(300)] +
                                   [f"e{i:03d}" for i in range(0, 300, 3)])  # fmt: skip
    files = 1 + 300 + 300 + 100 + 100  # lists and records, both levels
    assert len(holds) >= files // 16, len(holds)
    store.close()
