"""`ledger prune` drops history lines with short lock holds (docs/design.md §5.4,
§6.4): history.jsonl is copied outside the lock and renamed under it
(historyrewrite.drop_keys_briefly).

- the result is the one rewrite under the lock gives (`drop_keys`): the kept
  lines in order, a torn tail (damage, under the lock) or a corrupt line
  refused;
- lines appended while the copy runs (through another store object, between
  the holds) are all kept, once, in order, and a burst larger than
  CATCH_UP_BYTES is copied outside the lock before the last hold;
- the last hold copies only what arrived after the previous one;
- another prune's rename in between makes the rewrite start again;
- without O_TMPFILE the file is rewritten under one hold, as before;
- a SIGKILL at every step of a prune leaves the old history or the new one,
  and the next writer sweeps what it left;
- processes appending history (alone and in journalled batches) while two
  prunes run lose no line and duplicate none.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.history import HistoryEntry
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.prune import pruned_form
from ledger_cli.engine.record import TaskState
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, historyrewrite, spares, swap
from tests.faults_support import STEPS, OsFaults, temps

FORK = multiprocessing.get_context("fork")
T0 = "2026-01-02T03:04:05Z"
NOW = Instant.parse(T0)


def _entry(key: str, n: int = 0, pad: int = 40) -> HistoryEntry:
    return HistoryEntry(T0, "test", "ledger.note", key, n, f"note {n} " + "x" * pad)


def _lines(root: Path) -> list[tuple[str, int]]:
    return [(e.key, e.fence) for e in JsonFileStore(root).read_history()]


def _store_with_history(root: Path, keep: int, drop: int) -> JsonFileStore:
    """keep-* and old-* lines, interleaved."""
    store = JsonFileStore(root)
    entries = []
    for i in range(max(keep, drop)):
        if i < keep:
            entries.append(_entry(f"keep-{i:05d}", i))
        if i < drop:
            entries.append(_entry(f"old-{i:05d}", i))
    store.append_history(entries)
    return store


def _locked(store: JsonFileStore) -> Callable[[], contextlib.AbstractContextManager[int | None]]:
    return lambda: store._locked(create=False)


def test_the_rewrite_keeps_what_one_hold_kept(tmp_path: Path) -> None:
    a = _store_with_history(tmp_path / "a", 300, 200)
    b = _store_with_history(tmp_path / "b", 300, 200)
    keys = {f"old-{i:05d}" for i in range(200)} | {"keep-00007"}
    historyrewrite.drop_keys_briefly(str(tmp_path / "a"), _locked(a), keys)
    with b._locked(create=False) as root_fd:
        assert root_fd is not None
        historyrewrite.drop_keys(str(tmp_path / "b"), root_fd, keys)
    got = (tmp_path / "a" / "history.jsonl").read_bytes()
    assert got == (tmp_path / "b" / "history.jsonl").read_bytes()
    assert _lines(tmp_path / "a") == [(f"keep-{i:05d}", i) for i in range(300) if i != 7]
    assert (tmp_path / "a" / "history.jsonl").stat().st_mode & 0o777 == 0o600
    assert temps(tmp_path / "a") == []


def test_a_corrupt_line_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    store = _store_with_history(tmp_path, 10, 10)
    path = tmp_path / "history.jsonl"
    path.write_bytes(path.read_bytes() + b"not json\n")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="corrupt history entry"):
        historyrewrite.drop_keys_briefly(str(tmp_path), _locked(store), {"old-00001"})
    assert path.read_bytes() == before
    assert temps(tmp_path) == []


@pytest.mark.parametrize("tmpfile", [True, False])
def test_a_torn_tail_is_refused_never_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tmpfile: bool
) -> None:
    """Under the lock a crash's torn line is already cut by the replay: one
    left is damage, refused as every writer refuses it (`doctor --fix
    --drop-damaged` accepts its loss, keeping the bytes)."""
    store = _store_with_history(tmp_path, 10, 10)
    if not tmpfile:
        monkeypatch.setattr(spares, "_O_TMPFILE", 0)
    path = tmp_path / "history.jsonl"
    path.write_bytes(path.read_bytes() + b'{"time":"2026-01-02T03:04:05Z","actor":"torn')
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"history\.jsonl: damaged history \(it ends mid-line"):
        historyrewrite.drop_keys_briefly(str(tmp_path), _locked(store), {"old-00001"})
    assert path.read_bytes() == before
    assert temps(tmp_path) == []


class Interleaved:
    """The store lock, with `before()` run (outside the lock) before each hold;
    records whether each copy ran inside a hold and how many bytes it copied."""

    def __init__(self, store: JsonFileStore, before: Callable[[int], None]) -> None:
        self._store = store
        self._before = before
        self.holds = 0
        self.inside = False
        self.copies: list[tuple[bool, int]] = []

    @contextlib.contextmanager
    def __call__(self) -> Iterator[int | None]:
        self._before(self.holds)
        self.holds += 1
        with self._store._locked(create=False) as root_fd:
            self.inside = True
            try:
                yield root_fd
            finally:
                self.inside = False


def _spy_copies(monkeypatch: pytest.MonkeyPatch, lock: Interleaved) -> None:
    real = historyrewrite._copy_kept

    def spy(src: int, out: int, start: int, end: int, keys: set[str], path: str) -> None:
        lock.copies.append((lock.inside, end - start))
        real(src, out, start, end, keys, path)

    monkeypatch.setattr(historyrewrite, "_copy_kept", spy)


def test_lines_appended_during_the_copy_are_kept_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store_with_history(tmp_path, 2000, 2000)
    other = JsonFileStore(tmp_path)  # another writer, its own lock
    written: list[tuple[str, int]] = []

    def before(hold: int) -> None:
        if hold == 0:
            return
        # Between holds: a burst bigger than CATCH_UP_BYTES (copied outside the
        # lock), then a few lines; each with a line of a dropped key (dropped).
        big = hold == 1
        n = 12000 if big else 3
        batch = [_entry(f"new-{hold}-{i:05d}", i, pad=100 if big else 40) for i in range(n)]
        other.append_history([*batch, _entry("old-00003", 99)])
        written.extend((e.key, e.fence) for e in batch)

    lock = Interleaved(store, before)
    _spy_copies(monkeypatch, lock)
    monkeypatch.setattr(historyrewrite, "CATCH_UP_BYTES", 64 * 1024)
    keys = {f"old-{i:05d}" for i in range(2000)}
    historyrewrite.drop_keys_briefly(str(tmp_path), lock, keys)
    kept = [(f"keep-{i:05d}", i) for i in range(2000)]
    assert _lines(tmp_path) == kept + written
    assert lock.holds == 3  # the first; one that finds the burst and lets go; the last
    under = [size for inside, size in lock.copies if inside]
    assert len(under) == 1 and under[0] <= 64 * 1024  # the last hold copies the tail only
    outside = [size for inside, size in lock.copies if not inside]
    assert len(outside) == 2 and min(outside) > 64 * 1024  # the history, then the burst
    assert temps(tmp_path) == []


def test_another_rewrite_in_between_starts_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store_with_history(tmp_path, 500, 500)
    other = JsonFileStore(tmp_path)

    def before(hold: int) -> None:
        if hold == 1:  # another prune replaces the file between our holds
            historyrewrite.drop_keys_briefly(str(tmp_path), _locked(other), {"keep-00001"})
            other.append_history([_entry("after", 1)])

    lock = Interleaved(store, before)
    historyrewrite.drop_keys_briefly(str(tmp_path), lock, {f"old-{i:05d}" for i in range(500)})
    expected = [(f"keep-{i:05d}", i) for i in range(500) if i != 1] + [("after", 1)]
    assert _lines(tmp_path) == expected
    assert lock.holds >= 3  # the first attempt gave up at its second hold


def test_without_o_tmpfile_one_hold_rewrites_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store_with_history(tmp_path, 50, 50)
    monkeypatch.setattr(spares, "_O_TMPFILE", 0)
    lock = Interleaved(store, lambda hold: None)
    historyrewrite.drop_keys_briefly(str(tmp_path), lock, {f"old-{i:05d}" for i in range(50)})
    assert _lines(tmp_path) == [(f"keep-{i:05d}", i) for i in range(50)]
    assert lock.holds == 1


# -- a crash at every step ----------------------------------------------------------------------

PRUNED = 6


def _old_record(key: str) -> TaskState:
    return TaskState(
        key=key, status="completed", sequence=1, task={"k": key}, created_by="t",
        created_at=NOW, updated_by="t", updated_at=NOW,
    )  # fmt: skip


def _prepared(root: Path) -> None:
    store = JsonFileStore(root)
    with store.batch():
        for i in range(PRUNED):
            key = f"old-{i:05d}"
            assert store.compare_and_swap(key, None, _old_record(key))
    _store_with_history(root, 40, PRUNED)


def _prune(root: Path) -> None:
    store = JsonFileStore(root)
    pairs = []
    for i in range(PRUNED):
        rec = store.load(f"old-{i:05d}")
        assert rec is not None
        pairs.append((rec, pruned_form(rec)))
    assert store.prune_records(pairs) == PRUNED


def _crash_child(root: str, kill_at: tuple[str, int]) -> None:
    with OsFaults(kill_at=kill_at):
        _prune(Path(root))


def test_a_crash_at_any_step_leaves_the_old_or_the_new_history(tmp_path: Path) -> None:
    base = tmp_path / "base"
    _prepared(base)
    old = _lines(base)
    new = [line for line in old if not line[0].startswith("old-")]
    ref = tmp_path / "ref"
    shutil.copytree(base, ref)
    counting = OsFaults()
    with counting:
        _prune(ref)
    assert _lines(ref) == new
    steps = {s: n for s, n in counting.steps.items() if s in STEPS and n}
    assert {"linked", "renamed", "dir-fsynced", "file-fsynced"} <= set(steps)
    seen_new = seen_old = 0
    for step, count in sorted(steps.items()):
        for n in range(1, count + 1):
            root = tmp_path / f"{step}-{n}"
            shutil.copytree(base, root)
            proc = FORK.Process(target=_crash_child, args=(str(root), (step, n)))
            proc.start()
            proc.join(120)
            assert proc.exitcode == -signal.SIGKILL, (step, n, proc.exitcode)
            got = _lines(root)
            assert got in (old, new), (step, n)
            seen_new += got == new
            seen_old += got == old
            store = JsonFileStore(root)  # the next writer sweeps the leftovers
            store.append_history([_entry("next", 1)])
            assert temps(root) == [], (step, n)
            assert _lines(root) == [*got, ("next", 1)]
            store.close()
            shutil.rmtree(root)
    assert seen_new and seen_old


# -- many processes --------------------------------------------------------------------------

WRITERS = 3
PRUNERS = 2
PER_PRUNER = 150


def _writer(root: str, w: int, stop: Any, counts: Any) -> None:
    """Appends history until told to stop: alone (one file) and in a journalled
    batch with a record, alternately."""
    store = JsonFileStore(root)
    n = 0
    while not stop.is_set() or n < 40:
        key = f"w{w}-{n:05d}"
        if n % 2:
            store.append_history([_entry(key, n)])
        else:
            with store.batch():
                rec = _old_record(key).replace(status="pending")
                assert store.compare_and_swap(key, None, rec)
                store.append_history([_entry(key, n)])
        n += 1
        counts[w] = n
    swap.wait_retired()  # a forked child ends by os._exit: no atexit runs


def _pruner(root: str, p: int, start: Any) -> None:
    store = JsonFileStore(root)
    start.wait()
    pairs = []
    for i in range(PER_PRUNER):
        rec = store.load(f"old-{p}-{i:05d}")
        assert rec is not None
        pairs.append((rec, pruned_form(rec)))
    assert store.prune_records(pairs) == PER_PRUNER
    swap.wait_retired()


def test_writers_lose_no_line_while_prunes_run(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = JsonFileStore(root)
    with store.batch():
        for p in range(PRUNERS):
            for i in range(PER_PRUNER):
                key = f"old-{p}-{i:05d}"
                assert store.compare_and_swap(key, None, _old_record(key))
    filler = [_entry(f"keep-{i:05d}", i, pad=120) for i in range(30000)]
    olds = [_entry(f"old-{p}-{i:05d}", i) for p in range(PRUNERS) for i in range(PER_PRUNER)]
    store.append_history(filler[:15000] + olds + filler[15000:])
    stop = FORK.Event()
    start = FORK.Barrier(PRUNERS)
    counts = FORK.Array("i", WRITERS)
    writers = [
        FORK.Process(target=_writer, args=(str(root), w, stop, counts)) for w in range(WRITERS)
    ]
    pruners = [FORK.Process(target=_pruner, args=(str(root), p, start)) for p in range(PRUNERS)]
    for proc in writers:
        proc.start()
    deadline = time.monotonic() + 60
    while min(counts) < 10 and time.monotonic() < deadline:  # writing before the prunes
        time.sleep(0.01)
    before = sum(counts)
    for proc in pruners:
        proc.start()
    for proc in pruners:
        proc.join(300)
        assert proc.exitcode == 0
    during = sum(counts) - before
    stop.set()
    for proc in writers:
        proc.join(300)
        assert proc.exitcode == 0
    lines = _lines(root)
    assert not [k for k, _ in lines if k.startswith("old-")]
    assert lines[:30000] == [(e.key, e.fence) for e in filler]
    for w in range(WRITERS):
        mine = [line for line in lines if line[0].startswith(f"w{w}-")]
        assert mine == [(f"w{w}-{n:05d}", n) for n in range(counts[w])], w
    assert len(lines) == 30000 + sum(counts)
    assert during > 0  # the writers wrote while the prunes ran
    assert JsonFileStore(root).count_pruned() == PRUNERS * PER_PRUNER
    assert temps(root) == []


def test_a_fifo_in_its_place_is_refused(tmp_path: Path) -> None:
    import os

    store = _store_with_history(tmp_path, 3, 3)
    (tmp_path / "history.jsonl").unlink()
    os.mkfifo(tmp_path / "history.jsonl", 0o600)
    with pytest.raises(StoreError, match="not a regular file"):
        historyrewrite.drop_keys_briefly(str(tmp_path), _locked(store), {"old-00001"})
