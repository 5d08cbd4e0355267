"""The JSON store's ready index promotes the tasks a completed need makes ready
through deps/, its one reverse-needs index (apply.py, readyindex.py): a need
with no record yet, a deps/ that is missing (a store older than it), one batch
completing a need and writing its dependents, and a ready/needs/ left by an
older release (ignored, removed by a rebuild)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.jsonfile import JsonFileStore, depsindex, key_digest, readyindex
from tests.cli_support import run_ledger

T0 = Instant.parse("2026-01-01T00:00:00Z")


def _finish(ledger: Ledger, key: str) -> None:
    fence = ledger.claim("t", key, "w", timedelta(hours=1), T0)
    ledger.complete("t", key, "w", fence, "completed", T0)


def _candidates(store: JsonFileStore) -> list[str]:
    return [rec.key for rec in store.ready_candidates()]


def _agrees(store: JsonFileStore) -> None:
    assert store.check_ready_index() == []
    assert store.check_deps_index() == []


def _legacy_needs(root: Path) -> Path:
    return root / readyindex.READY_DIR / readyindex.LEGACY_NEEDS_DIR


def test_a_waiting_task_is_promoted_and_ready_needs_is_never_written(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path / "s")
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    assert _candidates(store) == ["a"]
    digest = key_digest("a")
    assert digest is not None
    assert (tmp_path / "s" / depsindex.DEPS_DIR / digest[:2] / digest).exists()
    _finish(ledger, "a")
    assert _candidates(store) == ["b"]
    assert not _legacy_needs(tmp_path / "s").exists()
    _agrees(store)


def test_a_need_admitted_after_its_dependent(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path / "s")
    ledger = Ledger(store)
    ledger.admit("t", "c", 1, None, T0, "d")  # d has no record yet
    assert _candidates(store) == []
    ledger.admit("t", "d", 1, None, T0)
    _finish(ledger, "d")
    assert _candidates(store) == ["c"]
    _agrees(store)


def test_a_second_need_completing_promotes_only_then(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path / "s")
    ledger = Ledger(store)
    for key in ("x", "y"):
        ledger.admit("t", key, 1, None, T0)
    ledger.admit("t", "z", 1, None, T0, "x", "y")
    _finish(ledger, "x")
    assert "z" not in _candidates(store)
    _finish(ledger, "y")
    assert _candidates(store) == ["z"]
    _agrees(store)


def test_a_missing_deps_index_is_built_before_the_promotion(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = JsonFileStore(root)
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    fence = ledger.claim("t", "a", "w", timedelta(hours=1), T0)
    shutil.rmtree(root / depsindex.DEPS_DIR)  # as a store written before deps/
    ledger.complete("t", "a", "w", fence, "completed", T0)  # names no need itself
    assert (root / depsindex.DEPS_DIR / depsindex.MANIFEST).exists()
    assert _candidates(store) == ["b"]
    _agrees(store)


def test_a_ready_rebuild_builds_a_missing_deps_index(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = JsonFileStore(root)
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    shutil.rmtree(root / depsindex.DEPS_DIR)
    shutil.rmtree(root / readyindex.READY_DIR)  # a store older than both indexes
    assert _candidates(store) == ["a"]  # rebuilt both, deps/ first
    assert (root / depsindex.DEPS_DIR / depsindex.MANIFEST).exists()
    _finish(ledger, "a")
    assert _candidates(store) == ["b"]
    _agrees(store)


def test_one_batch_completing_a_need_and_writing_its_dependents(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path / "s")
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    ledger.admit("t", "gone", 1, None, T0, "a")
    fence = ledger.claim("t", "a", "w", timedelta(hours=1), T0)
    with store.batch():
        ledger.complete("t", "a", "w", fence, "completed", T0)
        ledger.admit("t", "c", 1, None, T0, "a")  # names it in the same batch
        ledger.cancel("t", "gone", T0)  # a listed dependent the batch finishes
    assert _candidates(store) == ["b", "c"]
    _agrees(store)


def test_rewriting_a_completed_need_keeps_its_promoted_dependents(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path / "s")
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    _finish(ledger, "a")
    rec = store.load("a")
    assert rec is not None and rec.status == "completed"
    assert store.compare_and_swap("a", rec, rec.replace(updated_at=T0 + timedelta(seconds=1)))
    assert _candidates(store) == ["b"]
    _agrees(store)


def test_an_old_ready_needs_directory_is_ignored_then_removed(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = JsonFileStore(root)
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    legacy = _legacy_needs(root) / "ab"
    legacy.mkdir(mode=0o700, parents=True)
    _legacy_needs(root).chmod(0o700)
    (legacy / ("ab" + "0" * 62)).write_text("not read\n")
    (legacy / ("ab" + "0" * 62)).chmod(0o600)
    _finish(ledger, "a")
    assert _candidates(store) == ["b"]
    _agrees(store)
    assert run_ledger(root, "doctor").returncode == 0  # not a problem: never read
    store.rebuild_ready_index()
    assert not _legacy_needs(root).exists()
    assert _candidates(store) == ["b"]


def test_doctor_fix_repairs_deps_then_ready(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = JsonFileStore(root)
    ledger = Ledger(store)
    ledger.admit("t", "a", 1, None, T0)
    ledger.admit("t", "b", 1, None, T0, "a")
    digest = key_digest("a")
    assert digest is not None
    (root / depsindex.DEPS_DIR / digest[:2] / digest).unlink()  # damage: b is not listed
    for chunk in (root / readyindex.READY_DIR).glob("c*"):
        chunk.write_text("0\n")  # ...and the candidates are gone (sound, empty chunks)
    bad = run_ledger(root, "doctor")
    assert bad.returncode == 9
    assert "dependents index" in bad.stdout and "ready index" in bad.stdout
    fixed = run_ledger(root, "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert fixed.stdout.index("dependents index") < fixed.stdout.index("ready index")
    _finish(ledger, "a")
    assert _candidates(store) == ["b"]
    _agrees(store)


def test_a_fan_in_check_reads_the_needs_after_the_one_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completing a fan-in's needs in the order it names them: each completion
    reads the next need, found not completed, not every need completed before
    it; the last one makes the fan-in a candidate."""
    store = JsonFileStore(tmp_path / "s")
    ledger = Ledger(store)
    needs = [f"n{i:02d}" for i in range(20)]
    for key in needs:
        ledger.admit("t", key, 1, None, T0)
    ledger.admit("t", "sink", 1, None, T0, *needs)
    for key in needs[:10]:
        _finish(ledger, key)
    reads: list[str] = []
    real = store._read_digest

    def counted(root_fd: int, digest: str) -> object:
        reads.append(digest)
        return real(root_fd, digest)

    monkeypatch.setattr(store, "_read_digest", counted)
    _finish(ledger, needs[10])
    assert reads.count(key_digest(needs[11])) == 1
    assert not {key_digest(k) for k in needs[:10]} & set(reads)
    monkeypatch.undo()
    for key in needs[11:]:
        _finish(ledger, key)
    assert "sink" in _candidates(store)
    _agrees(store)
