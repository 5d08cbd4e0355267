"""`doctor --fix` rebuilds the SQL stores' ready index in short blocks of keys
(stores/sql/rebuildranges.py; docs/design.md §5.4 "Short lock holds"): the result is the
one-transaction rebuild's, whatever the blocks' sizes, with writes landing
between blocks (in ranges already rebuilt and in ranges still to come) and
with another process writing all along."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.ready import ready_iter
from ledger_cli.stores.sql import rebuildranges
from tests.stores import KINDS, StoreKind

T0 = Instant.parse("2026-03-01T00:00:00Z")
TABLES = {
    "ledger_needs": "key, need",
    "ledger_ready": "key, created",
    "ledger_due": "key, rank, due",
}


@pytest.fixture(params=["sqlite", "postgresql"])
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return KINDS[str(request.param)]


@pytest.fixture
def place(kind: StoreKind, tmp_path: Path) -> Iterator[str]:
    with kind.place(tmp_path) as location:
        yield location


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 3 to 11 keys, so that a few hundred keys take many blocks."""
    monkeypatch.setattr(rebuildranges, "FIRST_KEYS", 7)
    monkeypatch.setattr(rebuildranges, "MIN_KEYS", 3)
    monkeypatch.setattr(rebuildranges, "MAX_KEYS", 11)


def _sql(store: Any, *statements: str) -> None:
    with store.batch():
        for statement in statements:
            store._conn.execute(statement)


def _tables(store: Any) -> dict[str, list[tuple[Any, ...]]]:
    with store.batch():
        return {
            t: [tuple(r) for r in store._conn.execute(f"SELECT {c} FROM {t} ORDER BY {c}")]
            for t, c in TABLES.items()
        }


def _fill(ledger: Ledger, n: int) -> None:
    """n tasks: chains of needs across the key space (a need both before and
    after its dependent), some completed, some failed, some claimed, some
    naming a key never admitted, some with a priority."""
    from ledger_cli.engine import schedule

    for i in range(n):
        needs = [f"k{(i * 7) % n:04d}"] if i % 3 == 0 and (i * 7) % n != i else []
        if i % 17 == 0:
            needs.append("never-admitted")
        ledger.admit("t", f"k{i:04d}", 1, {"n": i}, T0, *needs)
        if i % 5 == 0:
            with ledger.store.batch():
                schedule.put(ledger.store, f"k{i:04d}", (Instant.ZERO, i % 4))
    for i in range(0, n, 4):
        try:
            fence = ledger.claim("t", f"k{i:04d}", "w", timedelta(hours=1), T0)
        except Exception:
            continue  # blocked, or waiting on a need: not claimable, as it should be
        if i % 8 == 0:
            ledger.complete(
                "t", f"k{i:04d}", "w", fence, "failed" if i % 24 == 0 else "completed", T0
            )


def _damage(store: Any) -> None:
    _sql(
        store,
        "DELETE FROM ledger_ready WHERE key > 'k0100' AND key < 'k0200'",
        "DELETE FROM ledger_needs WHERE key > 'k0150' AND key < 'k0250'",
        "DELETE FROM ledger_due WHERE key > 'k0220' AND key < 'k0260'",
        # rows of no task: before the first key, between two, after the last
        "INSERT INTO ledger_ready (key, created) VALUES ('a', ''), ('k0003x', ''), ('z', '')",
        "INSERT INTO ledger_needs (key, need) VALUES ('a', 'b'), ('k0010', 'k9999'), ('z', 'y')",
        "INSERT INTO ledger_due (key, rank, due) VALUES ('aa', 0, ''), ('zz', 1, '')",
    )


def test_a_rebuild_in_many_blocks_is_the_whole_rebuild(
    kind: StoreKind, place: str, small_blocks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: Any = kind.open(place, lambda: T0)
    _fill(Ledger(store), 300)
    assert store.check_ready_index() == []
    kept = _tables(store)  # what the triggers kept: the truth
    assert all(kept.values()), kept
    _damage(store)
    assert len(store.check_ready_index()) >= 4
    blocks: list[tuple[str | None, int]] = []
    block = store._rebuild_range
    monkeypatch.setattr(store, "_rebuild_range", lambda a, k: blocks.append((a, k)) or block(a, k))
    store.rebuild_ready_index()
    assert store.check_ready_index() == []
    assert _tables(store) == kept
    assert len(blocks) >= 300 // 11 and blocks[0][0] is None
    assert all(3 <= k <= 11 for _, k in blocks)
    store.close()


def test_writes_between_blocks_are_kept(
    kind: StoreKind, place: str, small_blocks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two blocks another connection completes needs (their
    dependents in ranges rebuilt and in ranges to come), fails some, and
    admits tasks needing them."""
    monkeypatch.setattr(rebuildranges, "MAX_KEYS", 5)  # 200 keys: 40 blocks at least
    store: Any = kind.open(place, lambda: T0)
    other: Any = kind.open(place, lambda: T0)
    ledger, writer = Ledger(store), Ledger(other)
    n = 200
    for i in range(n):  # k{i} needs k{n-1-i}: every dependent's need across the middle
        ledger.admit("t", f"k{i:04d}", 1, {}, T0, *([f"k{n - 1 - i:04d}"] if i < n // 2 else []))
    _damage(store)
    _sql(store, "DELETE FROM ledger_needs WHERE key < 'k0050'")
    block = store._rebuild_range
    writes = iter(range(n // 2, n))  # 100 needs, three between two blocks: 34 blocks

    def between(after: str | None, keys: int) -> str | None:
        last = block(after, keys)
        for _ in range(3):
            i = next(writes, None)
            if i is None:
                break
            key = f"k{i:04d}"
            fence = writer.claim("t", key, "w", timedelta(hours=1), T0)
            writer.complete("t", key, "w", fence, "failed" if i % 10 == 0 else "completed", T0)
            writer.admit("t", f"n{i:04d}", 1, {}, T0, key)
        return last

    monkeypatch.setattr(store, "_rebuild_range", between)
    store.rebuild_ready_index()
    assert next(writes, None) is None, "the rebuild ended before the writes did"
    assert store.check_ready_index() == []
    with store.batch():
        got = [r.key for r in ready_iter(store, store.load, T0)]
    # every dependent whose need completed is ready; none whose need failed is
    want = [f"k{i:04d}" for i in range(n // 2) if (n - 1 - i) % 10 != 0]
    want += [f"n{i:04d}" for i in range(n // 2, n) if i % 10 != 0]
    assert sorted(got) == want
    other.close()
    store.close()


_WRITER = r"""
import sys, time
from datetime import timedelta
from tests.stores import KINDS
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
kind, place = KINDS[sys.argv[1]], sys.argv[2]
now = Instant.parse("2026-03-01T00:00:00Z")
ledger = Ledger(kind.open(place, lambda: now))
i = 0
while True:
    key = f"k{(i * 37) % 400:04d}"
    try:
        fence = ledger.claim("w", key, "w", timedelta(hours=1), now)
        ledger.complete("w", key, "w", fence, "completed", now)
    except Exception:
        pass  # waiting on a need, or done already
    # before every k key: in the ranges rebuilt already, so the rebuild does not chase it
    ledger.admit("w", f"a{i:05d}", 1, {}, now, key, f"k{(i * 11) % 400:04d}")
    i += 1
    print(time.monotonic(), flush=True)
"""


def test_a_rebuild_beside_a_writing_process(
    kind: StoreKind, place: str, small_blocks: None
) -> None:
    store: Any = kind.open(place, lambda: T0)
    ledger = Ledger(store)
    for i in range(400):
        ledger.admit("t", f"k{i:04d}", 1, {}, T0, *([f"k{(i * 3) % 400:04d}"] if i % 2 else []))
    _damage(store)
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, kind.scheme, place],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": root},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # it writes
        started = time.monotonic()
        store.rebuild_ready_index()
        ended = time.monotonic()
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    during = [t for t in map(float, out.split()) if started < t < ended]
    assert during, f"no write landed while the index was rebuilt: {err[-2000:]}"
    assert store.check_ready_index() == []
    store.close()


def test_block_sizes_follow_the_target() -> None:
    """Blocks grow at most twofold towards TARGET_HOLD and shrink to it."""
    sizes: list[int] = []
    clock = [0.0]
    per_key = [rebuildranges.TARGET_HOLD / 100_000]  # seconds per key: cheap at first

    def block(after: str | None, keys: int) -> str | None:
        sizes.append(keys)
        clock[0] += keys * per_key[0]
        if len(sizes) == 5:
            per_key[0] *= 100  # the machine got busy
        return None if len(sizes) == 8 else f"k{len(sizes)}"

    blocks = rebuildranges.run(block, gap=0.0, clock=lambda: clock[0], sleep=lambda _: None)
    assert blocks == 8
    assert sizes[:5] == [1_000, 2_000, 4_000, 8_000, 16_000]
    assert 990 <= sizes[6] <= 1_000 and 990 <= sizes[7] <= 1_000  # 16,000 took 16x the target


def test_statement_conditions_and_parameters() -> None:
    sql = "DELETE FROM x WHERE {key}; SELECT 1 FROM t WHERE {t_key} AND {r_key}"
    assert rebuildranges.statement(sql, (None, None), "?") == (
        "DELETE FROM x WHERE 1 = 1; SELECT 1 FROM t WHERE 1 = 1 AND 1 = 1",
        (),
    )
    stmt, args = rebuildranges.statement(sql, ("a", "b"), "%s")
    assert stmt == (
        "DELETE FROM x WHERE key > %s AND key <= %s;"
        " SELECT 1 FROM t WHERE t.key > %s AND t.key <= %s AND r.key > %s AND r.key <= %s"
    )
    assert args == ("a", "b") * 3
    assert rebuildranges.statement("{key}", (None, "b"), "?") == ("key <= ?", ("b",))
