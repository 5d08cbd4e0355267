"""The JSON store's side files (a key's queue and schedule) go with the batch
that writes them (stores/jsonfile/keyfiles.py): staged in the open batch and
read back by it, undone with a savepoint, carried by the commit (a wal.log
frame or journal.json, version 3) and replayed after an apply cut short.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, apply, journal, keyfiles

T0 = Instant.parse("2026-01-02T03:04:05Z")
LATER = Instant.parse("2026-01-02T05:00:00Z")


def _insert(store: JsonFileStore, key: str) -> None:
    rec = TaskState(key=key, status="pending", sequence=1, created_at=T0, updated_at=T0)
    assert store.compare_and_swap(key, None, rec)


def test_a_batch_reads_back_what_it_staged_and_others_see_it_at_the_commit(
    tmp_path: Path,
) -> None:
    store = JsonFileStore(tmp_path / "s")
    _insert(store, "old")
    store.set_queue("old", "q")
    store.set_schedule("old", (LATER, 2))
    other = JsonFileStore(tmp_path / "s")
    with store.batch():
        _insert(store, "k")
        store.set_queue("k", "r")
        store.set_schedule("k", (Instant.ZERO, 7))
        store.set_queue("old", None)
        store.set_schedule("old", None)
        assert store.queue_of("k") == "r" and store.schedule_of("k") == (Instant.ZERO, 7)
        assert store.queue_of("old") is None and store.schedule_of("old") is None
        assert store.queues() == {"k": "r"}
        assert store.schedules() == {"k": (Instant.ZERO, 7)} and store.has_schedules()
        # Another store object (another process) sees the files as they are on disk.
        assert other.queue_of("k") is None and other.queue_of("old") == "q"
        assert other.schedule_of("old") == (LATER, 2)
    for seen in (other, JsonFileStore(tmp_path / "s")):
        assert seen.queues() == {"k": "r"}
        assert seen.schedules() == {"k": (Instant.ZERO, 7)}


def test_a_nested_batch_that_fails_takes_its_side_files_with_it(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path / "s")
    with store.batch():
        _insert(store, "a")
        store.set_queue("a", "q")
        with pytest.raises(RuntimeError), store.batch():
            store.set_queue("a", "r")
            store.set_schedule("a", (Instant.ZERO, 4))
            _insert(store, "b")
            store.set_queue("b", "q")
            raise RuntimeError("rolled back")
        assert store.queue_of("a") == "q" and store.schedule_of("a") is None
        assert store.queue_of("b") is None
    fresh = JsonFileStore(tmp_path / "s")
    assert fresh.load("b") is None
    assert fresh.queues() == {"a": "q"} and fresh.schedules() == {}
    assert not fresh.has_schedules()


def _fail_side_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(keyfiles, "apply_sides", broken)


@pytest.mark.parametrize("n", [3, apply.SYNC_EACH_MAX + 4], ids=["frame", "journal"])
def test_an_apply_cut_short_is_finished_by_the_next_opener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """The batch's commit carries its side files (version 3, listed in the
    header): when its apply fails after the commit point, the next opener
    writes them, with the records, and the ready index puts each key in its
    queue's partition in its priority's order."""
    root = tmp_path / "s"
    store = JsonFileStore(root)
    _insert(store, "first")
    _fail_side_writes(monkeypatch)
    with pytest.raises(StoreError), store.batch():
        for i in range(n):
            _insert(store, f"k{i}")
            store.set_queue(f"k{i}", "q")
            store.set_schedule(f"k{i}", (Instant.ZERO, i))
    if n > apply.SYNC_EACH_MAX:
        header = json.loads((root / "journal.json").read_bytes().partition(b"\n")[0])
        assert header["version"] == journal.SIDES_VERSION
        assert [side[:2] for side in header["sides"]][:2] == [["queue", "k0"], ["schedule", "k0"]]
    monkeypatch.undo()
    fresh = JsonFileStore(root)
    assert fresh.queues() == {f"k{i}": "q" for i in range(n)}
    assert fresh.schedules() == {f"k{i}": (Instant.ZERO, i) for i in range(n)}
    assert fresh.check_ready_index() == []
    from ledger_cli.engine.ready import ready_iter

    order = [r.key for r in ready_iter(fresh, fresh.load, LATER)]
    assert order == [*(f"k{i}" for i in reversed(range(1, n))), "first", "k0"]


def test_a_frame_with_side_files_names_a_version_older_releases_refuse(tmp_path: Path) -> None:
    """A journal whose side files an older release would drop says version 3;
    one whose listed side file is not that key's is refused before any write."""
    root = tmp_path / "s"
    store = JsonFileStore(root)
    _insert(store, "k")
    store.set_queue("k", "q")
    bad = (
        json.dumps(
            {
                "format": journal.JOURNAL_FORMAT,
                "version": journal.SIDES_VERSION,
                "records": 0,
                "history": 0,
                "history_at": None,
                "counts": None,
                "sides": [["queue", "k", 28]],
            }
        ).encode()
        + b"\n"
        + b'{"key":"x","queue":"r"}\n\n\n\n\n'[:28]
    )
    (root / "journal.json").write_bytes(bad)
    with pytest.raises(StoreError, match="corrupt journal header"):
        JsonFileStore(root)
    assert journal.SIDES_VERSION > journal.ATTEMPTS_VERSION > journal.JOURNAL_VERSION
