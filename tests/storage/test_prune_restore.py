"""Pruned records through snapshot and restore (docs/design.md §2.10, §6.4), on every store.

A snapshot marks each pruned record `"Pruned":true`; `prune.restore` (the
store's `restore_pruned`) puts it back straight into the pruned form, so the
restored store lists, counts and refuses it as the source did. A snapshot of a
store without pruned records does not change by a byte.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine import prune, wireext
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.store import Store
from ledger_cli.errors import DecodeError, LedgerError
from tests.stores import KINDS

T0 = Instant.parse("2026-03-01T00:00:00Z")
LATER = Instant.parse("2026-03-01T02:00:00Z")
LEASE = timedelta(minutes=1)


@contextlib.contextmanager
def _opened(name: str, where: Path) -> Iterator[Store]:
    """A fresh store of kind `name` under `where` (reopened once when durable: what
    the tests then read went through the store's files or tables)."""
    kind = KINDS[name]
    where.mkdir()
    with kind.place(where) as location:
        store = kind.open(location, lambda: T0)
        try:
            yield store
        finally:
            store.close()


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with _opened(str(request.param), tmp_path / "source") as s:
        yield s


def _finished(key: str, status: str = "failed") -> TaskState:
    return TaskState(
        key=key,
        status=status,
        sequence=1,
        owner="w",
        fence=1,
        created_by="t",
        created_at=T0,
        updated_by="t",
        updated_at=T0,
    )


def _source(store: Store) -> Ledger:
    """done and lost pruned; todo, after and bad (failed later) live."""
    led = Ledger(store)
    led.admit("t", "todo", 1, None, T0)
    led.admit("t", "done", 1, {"big": "payload"}, T0)
    led.admit("t", "after", 1, None, T0, "done")
    for key in ("bad", "lost"):
        led.admit("t", key, 1, None, T0)
    for key, status, when in (
        ("done", "completed", T0),
        ("bad", "failed", LATER),
        ("lost", "failed", T0),
    ):
        fence = led.claim("t", key, "w", LEASE, when)
        led.complete("t", key, "w", fence, status, when)
    assert led.prune(timedelta(hours=1), LATER) == 2
    return led


def _snapshot(store: Store) -> bytes:
    """What `ledger snapshot` writes (cli/commands/snapshot.py)."""
    tasks = Ledger(store).snapshot().tasks
    return wireext.encode(tasks, {}, {}, prune.keys(store))


def _restore(store: Store, data: bytes) -> None:
    """What `ledger restore` does (cli/commands/restore.py), in one batch."""
    marked = wireext.decode_pruned(data)
    tasks = Snapshot.decode(data).tasks or ()
    with store.batch():
        for rec in tasks:
            if rec.key not in marked:
                assert store.compare_and_swap(rec.key, None, rec)
        assert prune.restore(store, [r for r in tasks if r.key in marked]) is None


def _view(store: Store) -> tuple[list[str], list[str], list[tuple[str, str]], int]:
    return (
        [r.key for r in prune.visible(store)],
        [r.key for r in prune.pruned(store)],
        [(r.key, r.status) for r in prune.pruned(store)],
        prune.count_pruned(store),
    )


def test_a_snapshot_marks_the_pruned_records(store: Store) -> None:
    _source(store)
    data = _snapshot(store)
    assert data.count(b'"Pruned":true') == 2
    assert wireext.decode_pruned(data) == {"done", "lost"}
    # Go's decoder ignores the member: the records decode as ever.
    assert [r.key for r in Snapshot.decode(data).tasks or ()] == [
        "after",
        "bad",
        "done",
        "lost",
        "todo",
    ]


@pytest.mark.parametrize("target", sorted(KINDS))
def test_restore_keeps_records_pruned(store: Store, target: str, tmp_path: Path) -> None:
    _source(store)
    data = _snapshot(store)
    with _opened(target, tmp_path / "target") as dest:
        _restore(dest, data)
        assert _view(dest) == _view(store)
        assert _view(dest)[1] == ["done", "lost"]
        assert prune.is_pruned(dest, "lost") and not prune.is_pruned(dest, "bad")
        lost = dest.load("lost")
        assert lost is not None and (lost.status, lost.task, lost.rev) == ("failed", None, 0)
        led = Ledger(dest)
        with pytest.raises(LedgerError, match="pruned"):
            led.retry("t", "lost", LATER)
        assert led.admit("t", "done", 1, None, LATER) is False  # a duplicate still
        assert led.retry("t", "bad", LATER) == []  # the live failure is live
        # The restored store's snapshot marks the same records.
        assert wireext.decode_pruned(_snapshot(dest)) == {"done", "lost"}


def test_restore_pruned_writes_nothing_when_a_key_is_taken(store: Store) -> None:
    Ledger(store).admit("t", "b", 1, None, T0)
    assert prune.restore(store, [_finished("a"), _finished("b"), _finished("c")]) == "b"
    assert store.load("a") is None and store.load("c") is None
    assert prune.count_pruned(store) == 0
    assert prune.restore(store, [_finished("a")]) is None
    assert prune.restore(store, [_finished("a", "completed")]) == "a"  # a pruned key is taken
    assert prune.count_pruned(store) == 1


def test_restore_pruned_in_a_batch(store: Store) -> None:
    with store.batch():
        assert store.compare_and_swap("live", None, _finished("live", "completed"))
        assert prune.restore(store, [_finished("gone")]) is None
        gone = store.load("gone")
        assert gone is not None and gone.status == "failed"
    assert [r.key for r in prune.visible(store)] == ["live"]
    assert [r.key for r in prune.pruned(store)] == ["gone"]


def test_a_store_without_pruned_records_snapshots_as_before(store: Store) -> None:
    led = Ledger(store)
    led.admit("t", "a", 1, {"n": 1}, T0)
    led.admit("t", "b", 1, None, T0, "a")
    assert prune.keys(store) == frozenset()
    assert _snapshot(store) == led.snapshot().encode()


def test_the_pruned_member_is_true_or_false() -> None:
    rec = _finished("k")
    base = wireext.encode((rec,), {}, {}, frozenset({"k"}))
    assert base.endswith(b',"Pruned":true}]}')
    assert wireext.decode_pruned(base.replace(b"true", b"false")) == frozenset()
    with pytest.raises(DecodeError, match="entry 0: Pruned is not true or false"):
        wireext.decode_pruned(base.replace(b"true", b'"yes"'))
    assert wireext.decode_pruned(wireext.encode((rec,), {}, {})) == frozenset()
