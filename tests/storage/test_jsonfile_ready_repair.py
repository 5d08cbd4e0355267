"""`doctor --fix` repairs the JSON store's ready index in short lock holds
(stores/jsonfile/readyview.py `rebuild_ready_index`): the candidates a
lock-free scan finds missing are added in blocks, each judged again under the
lock; the result is what the writers keep, with writes landing between blocks
and another process writing all along. An index that is not there is rebuilt
whole."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.jsonfile import JsonFileStore, readyindex, readyview

T0 = Instant.parse("2026-03-01T00:00:00Z")


def _indexed(root: Path) -> list[str]:
    """Every key the index holds, in its order (stale entries included)."""
    store = JsonFileStore(root)
    try:
        with store._locked(create=False) as root_fd:
            assert root_fd is not None
            rfd = readyindex.open_dir(str(root), root_fd, create=False)
            assert rfd is not None
            try:
                chunks = readyindex.load_chunks(str(root), root_fd, rfd)
                assert chunks is not None
                return [readyindex.key_of(e) for e in chunks.entries()]
            finally:
                os.close(rfd)
    finally:
        store.close()


def _empty_chunks(root: Path) -> None:
    """Every chunk a sound one listing no entries (its count line: 0), so the
    index misses every candidate (an emptied file is damage, not this)."""
    for chunk in (root / readyindex.READY_DIR).glob("c*"):
        chunk.write_text("0\n")


def _fill(root: Path, n: int) -> Ledger:
    ledger = Ledger(JsonFileStore(root))
    for i in range(n):
        ledger.admit("t", f"k{i:04d}", 1, {}, T0, *([f"k{n - 1 - i:04d}"] if i % 3 == 0 else []))
    return ledger


def test_many_missing_candidates_are_added_in_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readyview, "_REPAIR_KEYS", 7)
    root = tmp_path / "s"
    ledger = _fill(root, 300)
    store = ledger.store
    kept = _indexed(root)
    assert len(kept) > 150
    _empty_chunks(root)
    assert len(store.check_ready_index()) == len(kept)
    holds: list[int] = []
    add = store._add_candidates
    monkeypatch.setattr(
        store,
        "_add_candidates",
        lambda fd, keys, *more: holds.append(len(keys)) or add(fd, keys, *more),
    )
    store.rebuild_ready_index()
    assert store.check_ready_index() == []
    assert _indexed(root) == kept
    assert len(holds) == len(kept) // 7 + 1 and max(holds) == 7


def test_writes_between_blocks_are_judged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between two blocks another store object claims and completes
    candidates still to be added (they are left out: no longer candidates),
    and completes needs (their dependents, missing, become candidates)."""
    monkeypatch.setattr(readyview, "_REPAIR_KEYS", 5)
    root = tmp_path / "s"
    ledger = _fill(root, 120)
    store = ledger.store
    writer = Ledger(JsonFileStore(root))
    _empty_chunks(root)
    keys = iter(f"k{i:04d}" for i in range(119, 0, -1) if i % 3)  # needs, from the last
    blocks = [0]

    def between() -> None:  # the lock is free here
        blocks[0] += 1
        key = next(keys, None)
        rec = None if key is None else writer.store.load(key)
        if key is not None and rec is not None and rec.status == "pending":
            fence = writer.claim("t", key, "w", timedelta(hours=1), T0)
            writer.complete("t", key, "w", fence, "completed", T0)
        if blocks[0] % 4 == 0:  # and a candidate still to be added stops being one
            late = f"k{min(119, 5 * blocks[0] + 40):04d}"
            rec = writer.store.load(late)
            if rec is not None and rec.status == "pending" and not rec.needs:
                fence = writer.claim("t", late, "w", timedelta(hours=1), T0)
                writer.complete("t", late, "w", fence, "failed", T0)

    monkeypatch.setattr(readyview, "_between_blocks", between)
    store.rebuild_ready_index()
    assert blocks[0] >= 10
    assert store.check_ready_index() == []
    records = {r.key: r for r in store.range()}
    live = [k for k, r in records.items() if readyindex.is_candidate(r, records.get)]
    assert any(r.status == "failed" for r in records.values())
    assert sorted(set(_indexed(root)) & set(live)) == sorted(live)
    writer.store.close()


_WRITER = r"""
import sys, time
from datetime import timedelta
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.jsonfile import JsonFileStore
now = Instant.parse("2026-03-01T00:00:00Z")
ledger = Ledger(JsonFileStore(sys.argv[1]))
i = 0
while True:
    key = f"k{(i * 37) % 300:04d}"
    try:
        fence = ledger.claim("w", key, "w", timedelta(hours=1), now)
        ledger.complete("w", key, "w", fence, "completed", now)
    except Exception:
        pass  # waiting on a need, or done already
    ledger.admit("w", f"a{i:05d}", 1, {}, now, key)
    i += 1
    print(time.monotonic(), flush=True)
"""


def test_a_repair_beside_a_writing_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readyview, "_REPAIR_KEYS", 3)
    root = tmp_path / "s"
    store = _fill(root, 300).store
    _empty_chunks(root)
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
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
    assert during, f"no write landed while the index was repaired: {err[-2000:]}"
    assert store.check_ready_index() == []


def test_a_missing_index_is_rebuilt_whole(tmp_path: Path) -> None:
    root = tmp_path / "s"
    store = _fill(root, 50).store
    kept = _indexed(root)
    (root / readyindex.READY_DIR / readyindex.MANIFEST).unlink()
    _empty_chunks(root)
    store.rebuild_ready_index()
    assert _indexed(root) == kept
    assert store.check_ready_index() == []


def test_the_check_confirms_in_blocks_what_it_found_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`doctor`'s check judges the candidates it found missing without the
    lock again under it, a block per hold: one that stopped being a
    candidate between blocks is not reported."""
    monkeypatch.setattr(readyview, "_REPAIR_KEYS", 7)
    root = tmp_path / "s"
    store = _fill(root, 120).store
    writer = Ledger(JsonFileStore(root))
    kept = _indexed(root)
    _empty_chunks(root)
    gone: list[str] = []  # the i-th finished before block i + 1 was judged

    def between() -> None:  # the lock is free here: finish the last missing key
        key = kept[-1 - len(gone)]
        fence = writer.claim("t", key, "w", timedelta(hours=1), T0)
        writer.complete("t", key, "w", fence, "completed", T0)
        gone.append(key)

    monkeypatch.setattr(readyview, "_between_blocks", between)
    problems = store.check_ready_index()
    assert len(gone) == (len(kept) - 1) // 7
    reported = [p.split("'")[1] for p in problems]
    judged_in = {key: i // 7 for i, key in enumerate(kept)}  # kept is in key order here
    late = {key for n, key in enumerate(gone) if judged_in[key] > n}
    assert late and not late & set(reported)
    assert sorted(set(reported) | late) == kept
    writer.store.close()
