"""`ledger prune` drops the pruned keys' attempts in short lock holds (docs/design.md
§5.4 "Short lock holds", §7.1), and what a crash between its blocks leaves is
found by `doctor` and removed by `doctor --fix`.

No timing assertion: a probe in this process takes the JSON store's lock over
and over while a fresh `ledger prune` runs, and counts the attempt files it
sees under the lock. One lock hold for every key's attempts (the old
removal, seconds with two fsyncs a key, long enough for a running task to
lose its lease) only ever shows all of them or none; blocks show counts in
between. The blocks start at `chunks.FIRST_ITEMS` keys and at most double, so
N keys take several blocks on any machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

from ledger_cli.cli.chunks import FIRST_ITEMS
from ledger_cli.engine.attempts import Attempt
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.stores.attemptlog import attempt_log
from ledger_cli.stores.jsonfile import JsonFileStore
from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

N = 8 * FIRST_ITEMS
"""Keys with an attempt: at least four blocks (32, 64, 128, then the rest)."""
THEN = "2026-01-02T03:04:05Z"


def build(root: Path, n: int) -> None:
    """`n` completed records, each with one attempt, last written at THEN."""
    t = Instant.parse(THEN)
    with JsonFileStore(root) as store:
        led = Ledger(store)
        log = attempt_log(store)
        with store.batch():
            for i in range(n):
                key = f"r{i:05d}"
                led.admit("a", key, 1, None, t)
                fence = led.claim("a", key, "w", timedelta(hours=1), t)
                log.start_attempt(Attempt(key, fence=fence, owner="w", started=THEN))
                led.complete("a", key, "w", fence, "completed", t)


def attempt_files(root: Path) -> int:
    walked = os.walk(root / "attempts")
    return sum(name.endswith(".att") for _, _, names in walked for name in names)


def test_prune_removes_attempts_in_blocks_another_lock_holder_sees(tmp_path: Path) -> None:
    root = tmp_path / "store"
    build(root, N)
    assert attempt_files(root) == N
    seen: set[int] = set()
    stop = threading.Event()

    def probe() -> None:
        with JsonFileStore(root) as store:
            while not stop.is_set():
                with store._locked(create=False):
                    seen.add(attempt_files(root))

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    try:
        res = subprocess.run(
            [*ledger_cmd(), "--store", f"json:{root}", "prune", "--older-than", "1s"],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=600,
            check=False,
        )
    finally:
        stop.set()
        thread.join(60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"pruned {N} records"
    assert attempt_files(root) == 0
    between = sorted(c for c in seen if 0 < c < N)
    assert between, f"the probe saw only {sorted(seen)}: every attempt went in one lock hold"
    assert run_ledger(root, "doctor").returncode == 0


def test_doctor_finds_and_fix_removes_attempts_a_killed_prune_left(tmp_path: Path) -> None:
    """A prune killed between its blocks leaves attempts of pruned keys: `doctor`
    notes them and `doctor --fix` removes them (a re-run of prune does too)."""
    root = tmp_path / "store"
    build(root, 3)
    saved = tmp_path / "attempts"
    shutil.copytree(root / "attempts", saved)
    res = run_ledger(root, "prune", "--older-than", "1s")
    assert res.returncode == 0, res.stderr
    shutil.rmtree(root / "attempts")
    shutil.copytree(saved, root / "attempts")  # as a crash before the attempts' blocks
    res = run_ledger(root, "doctor")
    assert res.returncode == 0, res.stderr
    assert "attempts of 'r00001', whose record is pruned (--fix removes them)" in res.stdout
    res = run_ledger(root, "doctor", "--fix")
    assert res.returncode == 0, res.stderr
    assert "removed the attempts of 'r00001', whose record is pruned" in res.stdout
    assert attempt_files(root) == 0
    res = run_ledger(root, "doctor")
    assert res.returncode == 0 and "attempts of" not in res.stdout, res.stdout


def test_stats_during_a_prune_counts_each_record_once(tmp_path: Path) -> None:
    """`stats`' figures read while a fresh `ledger prune` runs: every record is
    completed or pruned, never both nor neither (docs/design.md §5.5: figures
    read across a prune's block are read again under the lock)."""
    from ledger_cli.cli.commands.stats import gather

    root = tmp_path / "store"
    build(root, N)
    totals: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        with JsonFileStore(root) as store:
            while not stop.is_set():
                figures = gather(store, Instant.parse(THEN))[0]
                totals.append((figures.counts["completed"], figures.pruned))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        res = run_ledger(root, "prune", "--older-than", "1s", timeout=600)
    finally:
        stop.set()
        thread.join(60)
    assert res.returncode == 0, res.stderr
    assert totals
    wrong = [(c, p) for c, p in totals if c + p != N]
    assert not wrong, f"{len(wrong)} of {len(totals)} samples: {wrong[:5]}"
    assert len({p for _, p in totals}) > 2  # samples during the prune, not only around it
