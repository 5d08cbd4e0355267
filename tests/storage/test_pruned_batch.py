"""A batch of admits on a JSON store with pruned records (docs/design.md §6.4):
the holder of the store lock reads pruned/count and each pruned/ shard once,
however many keys it looks up, and still tells every pruned key from a new
one; a restore of pruned records inside the batch makes it read them again."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine import prune
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.stores.jsonfile import JsonFileStore, prunedcount

T0 = Instant.parse("2026-03-01T00:00:00Z")
LATER = Instant.parse("2026-03-01T02:00:00Z")
OLD = [f"old{i}" for i in range(60)]


def _pruned_store(where: Path) -> JsonFileStore:
    store = JsonFileStore(str(where))
    led = Ledger(store)
    for key in OLD:
        led.admit("t", key, 1, None, T0)
        fence = led.claim("t", key, "w", timedelta(minutes=1), T0)
        led.complete("t", key, "w", fence, "completed", T0)
    assert led.prune(timedelta(hours=1), LATER) == len(OLD)
    return store


def test_a_batch_reads_the_count_once_and_knows_every_pruned_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _pruned_store(tmp_path / "st")
    reads: list[int] = []
    real = prunedcount.read
    monkeypatch.setattr(prunedcount, "read", lambda *a: reads.append(1) or real(*a))
    led = Ledger(store)
    with store.batch():
        words = [led.admit_outcome("t", key, 1, None, LATER).word for key in OLD]
        words += [led.admit_outcome("t", f"new{i}", 1, None, LATER).word for i in range(20)]
    assert words == ["duplicate"] * len(OLD) + ["admitted"] * 20
    assert len(reads) == 1
    assert all(prune.is_pruned(store, key) for key in OLD)


def test_a_restore_inside_the_batch_reads_the_shards_again(tmp_path: Path) -> None:
    store = _pruned_store(tmp_path / "st")
    back = TaskState(
        key="back",
        status="failed",
        sequence=1,
        owner="w",
        fence=1,
        created_by="t",
        created_at=T0,
        updated_by="t",
        updated_at=T0,
    )
    with store.batch():
        assert not prune.is_pruned(store, "back")
        assert store.restore_pruned([back]) is None
        assert prune.is_pruned(store, "back")
        assert prune.is_pruned(store, OLD[0])
