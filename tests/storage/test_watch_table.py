"""`ledger watch`'s table on every store: the first rows by key and the total
(docs/design.md §6.6: pending, claimed, blocked, and the failed tasks that block
something) must be what a brute-force pass over `range()` gives, whichever
way the store serves them (a SQL store sorts and cuts in the database).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.cli.commands.stats import gather
from ledger_cli.cli.commands.watch import UNFINISHED, unfinished
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState, byte_order
from ledger_cli.engine.store import Store
from tests.stores import KINDS

T0 = Instant.parse("2026-03-01T00:00:00Z")
LATER = Instant.parse("2026-03-02T00:00:00Z")
FILTERS: list[set[str] | None] = [
    None,
    {"blocked"},
    {"failed"},
    {"pending", "claimed"},
    {"completed"},
]


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = KINDS[str(request.param)]
    with kind.place(tmp_path) as location, kind.open(location, lambda: T0) as opened:
        yield opened


def _finish(led: Ledger, key: str, status: str, now: Instant = T0) -> None:
    fence = led.claim("t", key, "w", timedelta(hours=1), now)
    led.complete("t", key, "w", fence, status, now)


def _workload(store: Store) -> None:
    """Keys in no particular order: pending, claimed, completed (some pruned),
    two failed roots blocking chains, a failure blocking nothing, a task
    naming a key never admitted."""
    led = Ledger(store)
    for key in ("p3", "p1", "é-pending", "p2", "c1", "c2", "done1", "done2", "f-quiet"):
        led.admit("t", key, 1, None, T0)
    led.admit("t", "w-never", 1, None, T0, "never-admitted")
    for root, chain in (("f-root-b", ("b2", "b1")), ("f-root-a", ("a1",))):
        led.admit("t", root, 1, None, T0)
        prev = root
        for key in chain:
            led.admit("t", key, 1, None, T0, prev)
            prev = key
        _finish(led, root, "failed")
    led.claim("t", "c1", "w", timedelta(hours=1), T0)
    led.claim("t", "c2", "w", timedelta(hours=1), T0)
    _finish(led, "done1", "completed")
    _finish(led, "done2", "completed")
    _finish(led, "f-quiet", "failed")
    assert led.prune(timedelta(0), LATER) >= 1  # done1, done2 (f-quiet: a failure)


def _brute(store: Store, statuses: set[str] | None) -> list[TaskState]:
    from ledger_cli.engine.prune import is_pruned

    every = {r.key: r for r in store.range() if not is_pruned(store, r.key)}
    live = [r for r in every.values() if r.status in UNFINISHED]
    roots = {r.blocked_by for r in live if r.status == "blocked"}
    rows = live + [every[k] for k in roots if k in every and every[k].status == "failed"]
    if statuses is not None:
        rows = [r for r in rows if r.status in statuses]
    return sorted(rows, key=lambda r: byte_order(r.key))


@pytest.mark.parametrize("statuses", FILTERS, ids=lambda f: ",".join(sorted(f or {"all"})))
@pytest.mark.parametrize("limit", [3, 200])
def test_the_table_is_the_brute_force_one(
    store: Store, statuses: set[str] | None, limit: int
) -> None:
    _workload(store)
    expected = _brute(store, statuses)
    assert any(r.status == "failed" for r in expected) or statuses not in (None, {"failed"})
    figures, records = gather(store, LATER)
    shown, total = unfinished(store, statuses, limit=limit, counts=figures.counts, records=records)
    assert [r.key for r in shown] == [r.key for r in expected[:limit]]
    assert total == len(expected)
    # Without the figures (no limit, no counts): every row, the same order.
    every, n = unfinished(store, statuses)
    assert [r.key for r in every] == [r.key for r in expected] and n == len(expected)
