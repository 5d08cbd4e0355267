"""No garbage collection while a store holds its lock (engine/collector.py).

A full collection over a big heap takes most of a second (measured 0.44-0.85
s in a 200,000-dependent walk); inside a lock hold it would hold the lock
that much longer. Each durable store pauses the collector where it takes
its lock: the JSON store's lock, SQLite's BEGIN IMMEDIATE, PostgreSQL's
transaction. These tests watch it from inside the holds, on every store:
the write batches, the nested ones, and prune's own transactions.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.prune import CHUNK, prune
from ledger_cli.engine.store import Store
from ledger_cli.stores.jsonfile import JsonFileStore
from tests.stores import KINDS

T0 = Instant.parse("2026-01-02T03:04:05Z")
HOUR = timedelta(hours=1)


@pytest.fixture(params=["json", "sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location:
        s = kind.open(location, Instant.now)
        try:
            yield s
        finally:
            s.close()


def _record_holds(store: Store, monkeypatch: pytest.MonkeyPatch, seen: list[bool]) -> None:
    """Append gc.isenabled() to `seen` from inside every lock hold of `store`:
    at the JSON lock's release, inside each outermost SQL batch."""
    if isinstance(store, JsonFileStore):
        lock = store._lock
        release = lock.release

        def recording_release() -> None:
            seen.append(gc.isenabled())
            release()

        monkeypatch.setattr(lock, "release", recording_release)
        return
    batch = store.batch
    depth = [0]

    @contextlib.contextmanager
    def recording_batch() -> Iterator[None]:
        with batch():
            depth[0] += 1
            try:
                if depth[0] == 1:
                    seen.append(gc.isenabled())
                yield
            finally:
                depth[0] -= 1

    monkeypatch.setattr(store, "batch", recording_batch)


def test_no_collection_inside_a_write_batch(store: Store) -> None:
    led = Ledger(store)
    led.admit("t", "first", 1, None, T0)  # the JSON store exists: its batch locks at entry
    assert gc.isenabled()
    with store.batch():
        led.admit("t", "a", 1, None, T0)
        assert not gc.isenabled()
        with store.batch():  # a savepoint
            led.admit("t", "b", 1, None, T0)
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()  # on again after the commit
    with pytest.raises(RuntimeError), store.batch():
        led.admit("t", "c", 1, None, T0)
        raise RuntimeError("rolled back")
    assert gc.isenabled()  # and after a rollback
    gc.disable()
    try:  # left off where the caller had it off
        with store.batch():
            led.admit("t", "d", 1, None, T0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_no_collection_inside_prunes_transactions(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    led = Ledger(store)
    keys = [f"k{i:04d}" for i in range(CHUNK + 10)]  # more than one transaction
    with store.batch():
        for key in keys:
            led.admit("t", key, 1, None, T0)
    for key in keys:
        led.claim("t", key, "w", HOUR, T0)
        led.complete("t", key, "w", 1, "completed", T0)
    seen: list[bool] = []
    _record_holds(store, monkeypatch, seen)
    later = Instant.from_unix_ns(T0.unix_ns + 2 * 3600 * 10**9, 0)
    assert prune(store, HOUR, ["completed"], later) == len(keys)
    assert len(seen) >= 2 and not any(seen), seen
    assert gc.isenabled()
