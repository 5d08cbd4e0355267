"""The stores' `dependents(keys)` hook (the records naming any of `keys` in
their needs) gives the engine's dependents walk exactly what one Range would,
on every store (every one of this package has the hook), through admits,
rebases, completions, restores, prunes and (MemStore) evictions; and the
JSON store's deps/ index (depsindex.py) survives being absent, stale, torn
or damaged."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine import prune
from ledger_cli.engine.dependents import dependents_walk
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.record import TaskState
from ledger_cli.engine.snapshot import Snapshot
from ledger_cli.engine.store import Store
from ledger_cli.errors import StoreError
from ledger_cli.stores.jsonfile import JsonFileStore, depsindex, key_digest
from tests.cli_support import run_ledger
from tests.stores import KINDS

T0 = Instant.parse("2026-01-01T00:00:00Z")


class RangeOnly:
    """A store seen without its hook: the walk falls back to one Range."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def range(self) -> Iterator[Any]:
        return self.inner.range()


@pytest.fixture(params=sorted(KINDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    kind = KINDS[request.param]
    with kind.place(tmp_path) as location, kind.open(location, lambda: T0) as s:
        yield s


def walks(store: Store, roots: list[str]) -> tuple[list[str], list[str]]:
    hooked = dependents_walk(store, roots)
    ranged = dependents_walk(RangeOnly(store), roots)
    assert hooked == ranged
    return sorted(hooked), sorted(ranged)


def test_every_store_has_the_hook(store: Store) -> None:
    assert callable(getattr(store, "dependents", None))


def test_the_hook_walks_what_a_range_walks(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    ledger.admit("t", "c", 1, None, T0, "b", "a")
    ledger.admit("t", "d", 1, None, T0, "c")
    ledger.admit("t", "x", 1, None, T0, "y")  # a need admitted later
    ledger.admit("t", "y", 1, None, T0, "x")  # a cycle
    ledger.admit("t", "z", 1, None, T0)
    assert walks(store, ["a"])[0] == ["b", "c", "d"]
    assert walks(store, ["x"])[0] == ["x", "y"]
    assert walks(store, ["z", "nothing"])[0] == []
    ledger.admit("t", "d", 2, None, T0, "z")  # a rebase changes the needs
    assert walks(store, ["a"])[0] == ["b", "c"]
    assert walks(store, ["z"])[0] == ["d"]
    assert walks(store, ["b", "y"])[0] == ["c", "x", "y"]


def _finish(ledger: Ledger, key: str, status: str = "completed") -> None:
    fence = ledger.claim("t", key, "w", timedelta(hours=1), T0)
    ledger.complete("t", key, "w", fence, status, T0)


def test_a_need_completed_before_its_dependent_was_admitted(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    _finish(ledger, "a")
    ledger.admit("t", "b", 1, None, T0, "a")  # never waits: ready/needs/ never lists it
    ledger.admit("t", "c", 1, None, T0, "b")
    assert walks(store, ["a"])[0] == ["b", "c"]


def test_finished_records_in_the_middle_of_a_chain(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    ledger.admit("t", "c", 1, None, T0, "b")
    ledger.admit("t", "d", 1, None, T0, "c")
    _finish(ledger, "a")
    _finish(ledger, "b")  # completed, and it named a need: still a dependent of a
    assert walks(store, ["a"])[0] == ["b", "c", "d"]
    _finish(ledger, "c", "failed")  # blocks d
    assert store.load("d").status == "blocked"  # type: ignore[union-attr]
    assert walks(store, ["a"])[0] == ["b", "c", "d"]
    assert ledger.retry("t", "c", T0) == ["d"]  # the walk through the hook
    assert walks(store, ["b"])[0] == ["c", "d"]


def test_rebases_that_add_drop_and_clear_needs(store: Store) -> None:
    ledger = Ledger(store)
    for key in ("a", "b"):
        ledger.admit("t", key, 1, None, T0)
    ledger.admit("t", "c", 1, None, T0, "a")
    ledger.admit("t", "c", 2, None, T0, "a", "b")  # adds b
    assert walks(store, ["b"])[0] == ["c"]
    ledger.admit("t", "c", 3, None, T0, "b")  # drops a: its line goes stale
    assert walks(store, ["a"])[0] == []
    assert walks(store, ["b"])[0] == ["c"]
    ledger.admit("t", "c", 4, None, T0)  # no needs left
    assert walks(store, ["a", "b"])[0] == []
    ledger.admit("t", "c", 5, None, T0, "a")  # back again
    assert walks(store, ["a"])[0] == ["c"]


def _rec(key: str, status: str, *needs: str) -> TaskState:
    return TaskState(
        key=key,
        status=status,
        sequence=1,
        fence=1,
        needs=needs or None,
        created_by="t",
        created_at=T0,
        updated_by="t",
        updated_at=T0,
    )


def test_restored_records(store: Store) -> None:
    snap = Snapshot(
        tasks=(
            _rec("r1", "completed"),
            _rec("r2", "completed", "r1"),
            _rec("r3", "failed", "r2", "ghost"),
            _rec("r4", "blocked", "r3").replace(blocked_by="r3"),
        )
    )
    Ledger(store).restore(snap)
    assert walks(store, ["r1"])[0] == ["r2", "r3", "r4"]
    assert walks(store, ["ghost"])[0] == ["r3", "r4"]


def test_pruned_needs_and_pruned_dependents(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    ledger.admit("t", "c", 1, None, T0, "b")
    _finish(ledger, "a")
    _finish(ledger, "b")
    # Prune a alone (b and c stay): a's dependents are still b and c.
    chosen = [r for r in prune.select(store, timedelta(0), ["completed"], T0) if r.key == "a"]
    prune_records = store.prune_records  # type: ignore[attr-defined]
    assert prune_records([(r, prune.pruned_form(r)) for r in chosen]) == 1
    assert prune.is_pruned(store, "a")
    assert walks(store, ["a"])[0] == ["b", "c"]
    # Prune b too: a pruned record names no needs, so it is nobody's dependent.
    chosen = [r for r in prune.select(store, timedelta(0), ["completed"], T0) if r.key == "b"]
    assert prune_records([(r, prune.pruned_form(r)) for r in chosen]) == 1
    assert walks(store, ["a"])[0] == []
    assert walks(store, ["b"])[0] == ["c"]


def test_a_batch_sees_its_own_writes(store: Store) -> None:
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    with store.batch():
        ledger.admit("t", "c", 1, None, T0, "a")  # not committed yet
        ledger.admit("t", "b", 2, None, T0)  # b no longer needs a (on disk it does)
        assert sorted(dependents_walk(store, ["a"])) == ["c"]
    assert walks(store, ["a"])[0] == ["c"]


# -- the JSON store's deps/ index --------------------------------------------------------


def _json_chain(tmp_path: Path) -> tuple[Path, JsonFileStore]:
    root = tmp_path / "store"
    store = JsonFileStore(root)
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    _finish(ledger, "a")
    ledger.admit("t", "b", 1, None, T0, "a")
    ledger.admit("t", "c", 1, None, T0, "b", "a")
    ledger.admit("t", "d", 1, None, T0, "c")
    return root, store


def _need_file(root: Path, need: str) -> Path:
    digest = key_digest(need)
    assert digest is not None
    return root / depsindex.DEPS_DIR / digest[:2] / digest


def test_a_store_written_without_the_index_is_rebuilt_when_opened(tmp_path: Path) -> None:
    root, store = _json_chain(tmp_path)
    store.close()
    shutil.rmtree(root / depsindex.DEPS_DIR)  # as a store of the release before it
    again = JsonFileStore(root)
    assert again.check_deps_index() == []  # not built: nothing to check yet
    assert walks(again, ["a"])[0] == ["b", "c", "d"]  # the hook rebuilt it first
    assert (root / depsindex.DEPS_DIR / depsindex.MANIFEST).exists()
    assert again.check_deps_index() == []


def test_a_write_with_needs_rebuilds_a_missing_index_first(tmp_path: Path) -> None:
    root, store = _json_chain(tmp_path)
    (root / depsindex.DEPS_DIR / depsindex.MANIFEST).unlink()  # a rebuild a crash cut short
    _need_file(root, "a").write_text("")  # ...that had cleared a's file
    Ledger(store).admit("t", "e", 1, None, T0, "d")
    assert (root / depsindex.DEPS_DIR / depsindex.MANIFEST).exists()
    assert store.check_deps_index() == []
    assert walks(store, ["a"])[0] == ["b", "c", "d", "e"]


def test_writes_without_needs_leave_the_index_alone(tmp_path: Path) -> None:
    root, store = _json_chain(tmp_path)
    before = {p: p.read_bytes() for p in (root / depsindex.DEPS_DIR).rglob("*") if p.is_file()}
    ledger = Ledger(store)
    _finish(ledger, "b")  # claim and complete: needs unchanged
    ledger.admit("t", "z", 1, None, T0)
    after = {p: p.read_bytes() for p in (root / depsindex.DEPS_DIR).rglob("*") if p.is_file()}
    assert after == before


def test_stale_repeated_and_torn_lines_are_dropped_on_read(tmp_path: Path) -> None:
    root, store = _json_chain(tmp_path)
    path = _need_file(root, "a")
    b, c = key_digest("b"), key_digest("c")
    ghost = key_digest("never-admitted")
    assert b is not None and c is not None and ghost is not None
    with path.open("ab") as fh:  # a repeat, a record that never got written, a torn append
        fh.write(f"\n{b}\n\n{ghost}\n\n{c[:17]}".encode())
    assert walks(store, ["a"])[0] == ["b", "c", "d"]
    assert sorted(path.read_text().split()) == sorted([b, c])  # rewritten: the truth


def test_a_damaged_file_is_refused_and_doctor_fix_rebuilds_it(tmp_path: Path) -> None:
    root, store = _json_chain(tmp_path)
    _need_file(root, "a").write_text("not an index\n")
    with pytest.raises(StoreError, match="corrupt dependents index entry"):
        dependents_walk(store, ["a"])
    assert run_ledger(root, "doctor").returncode == 9
    fixed = run_ledger(root, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "rebuilt the dependents index" in fixed.stdout
    assert walks(store, ["a"])[0] == ["b", "c", "d"]
