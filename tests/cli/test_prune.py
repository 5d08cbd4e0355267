"""`ledger prune` (docs/design.md §6.4) on every store: pruned records keep their key and
terminal status (admit says duplicate, fence operations are refused, a task
that needs one sees its status), lose Task, Needs and history, and leave the
listings; snapshot and claim --next stay right."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.engine import prune
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.ready import ready_iter
from ledger_cli.engine.store import Store
from ledger_cli.errors import LedgerError
from tests.cli_support import run_ledger
from tests.storage.test_ready_index import brute
from tests.stores import KINDS, StoreKind

T0 = Instant.parse("2026-03-01T00:00:00Z")
LATER = Instant.parse("2026-03-01T02:00:00Z")
LEASE = timedelta(minutes=1)


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> StoreKind:
    return KINDS[str(request.param)]


@pytest.fixture
def store(kind: StoreKind, tmp_path: Path) -> Iterator[Store]:
    with kind.place(tmp_path) as location:
        s = kind.open(location, lambda: T0)
        yield s
        s.close()


def _history_keys(store: Store) -> set[str]:
    read = getattr(store, "read_history", None)
    return {e.key for e in read()} if read is not None else set()


def _setup(store: Store) -> Ledger:
    from ledger_cli.engine.events import Recorder
    from ledger_cli.engine.history import HistoryEntry

    rec = Recorder()
    led = Ledger(store, rec)
    led.admit("t", "todo", 1, None, T0)
    led.admit("t", "done", 1, {"big": "payload"}, T0)
    led.admit("t", "after", 1, None, T0, "done")
    led.admit("t", "bad", 1, None, T0)
    led.admit("t", "stuck", 1, None, T0, "bad")
    led.admit("t", "lost", 1, None, T0)
    for key, status in (("done", "completed"), ("bad", "failed"), ("lost", "failed")):
        fence = led.claim("t", key, "w", LEASE, T0)
        led.complete("t", key, "w", fence, status, T0)
    append = getattr(store, "append_history", None)
    if append is not None:
        append([HistoryEntry(str(T0), "t", e.name, e.key, 0, e.data) for e in rec.events])
    return led


def test_prune_keeps_the_keys_and_drops_the_rest(store: Store) -> None:
    led = _setup(store)
    assert "stuck" in {r.key for r in store.range() if r.status == "blocked"}
    assert led.prune(timedelta(hours=1), LATER, dry_run=True) == 2  # done, lost (bad is named)
    assert prune.count_pruned(store) == 0
    assert led.prune(timedelta(hours=3), LATER) == 0  # not old enough
    assert led.prune(timedelta(hours=1), LATER, ("failed",)) == 1  # lost
    assert led.prune(timedelta(hours=1), LATER) == 1  # done
    assert prune.count_pruned(store) == 2
    done = store.load("done")
    assert done is not None and done.status == "completed"
    assert (done.task, done.needs, done.owner, done.fence) == (None, None, "w", 1)
    assert [r.key for r in prune.pruned(store)] == ["done", "lost"]
    assert [r.key for r in prune.visible(store)] == ["after", "bad", "stuck", "todo"]
    assert prune.is_pruned(store, "done") and not prune.is_pruned(store, "todo")
    if getattr(store, "read_history", None) is not None:
        assert _history_keys(store) == {"todo", "after", "bad", "stuck"}
    # Still the terminal record it was.
    assert led.admit("t", "done", 1, None, LATER) is False
    with pytest.raises(LedgerError):
        led.complete("t", "done", "w", 1, "completed", LATER)
    # A task that needs it sees "completed": ready, first in line (same CreatedAt, key order).
    assert brute(store, LATER) == ["after", "todo"]
    with store.batch():
        assert [r.key for r in ready_iter(store, store.load, LATER)] == ["after", "todo"]
    # The snapshot holds the pruned records as their remaining fields.
    snap = {r.key: r for r in led.snapshot().tasks or ()}
    assert snap["done"].task is None and snap["lost"].status == "failed"
    restored = Ledger()
    restored.restore(led.snapshot())
    assert restored.admit("t", "done", 1, None, LATER) is False


def test_a_failure_whose_blocks_have_not_landed_yet_is_kept(store: Store) -> None:
    """A failure commits before the blocks it causes (docs/design.md §5.4);
    a prune in between keeps it while an unfinished record needs it, as it
    keeps one a blocked record names: pruned, no retry could reopen it."""
    led = _setup(store)
    stuck = store.load("stuck")
    assert stuck is not None and stuck.blocked_by == "bad"
    assert store.compare_and_swap("stuck", stuck, stuck.replace(status="pending", blocked_by=""))
    assert led.prune(timedelta(hours=1), LATER, ("failed",)) == 1  # lost, not bad
    assert not prune.is_pruned(store, "bad") and prune.is_pruned(store, "lost")


def test_prune_from_the_command_line(tmp_path: Path) -> None:
    url = f"json:{tmp_path / 'store'}"
    now = ("--now", "2026-03-01T00:00:00Z")
    for key in ("a", "b"):
        assert run_ledger(url, *now, "admit", key, "--task", '{"n":1}').returncode == 0
        assert run_ledger(url, *now, "claim", key, "--owner", "w", "--lease", "1m").returncode == 0
        assert (
            run_ledger(url, *now, "complete", key, "--owner", "w", "--fence", "1").returncode == 0
        )
    later = ("--now", "2026-03-02T00:00:00Z")
    out = run_ledger(url, *later, "prune", "--older-than", "1d", "--dry-run")
    assert (out.returncode, out.stdout) == (0, "would prune 2 records\n")
    out = run_ledger(url, *later, "--json", "prune", "--older-than", "1h")
    assert json.loads(out.stdout) == {"pruned": 2, "dry_run": False}
    assert run_ledger(url, "list", "--jsonl").stdout == ""
    pruned = [
        json.loads(line)["Key"]
        for line in run_ledger(url, "list", "--pruned", "--jsonl").stdout.splitlines()
    ]
    assert pruned == ["a", "b"]
    assert "pruned" in run_ledger(url, "state", "a").stdout
    assert run_ledger(url, "log").stdout == ""
    assert run_ledger(url, "admit", "a").stdout == "duplicate\n"
    bad = run_ledger(url, *later, "prune", "--older-than", "1h", "--status", "pending")
    assert bad.returncode == 2 and "completed or failed" in bad.stderr
    bad = run_ledger(url, *later, "prune", "--older-than", "soon")
    assert bad.returncode == 2
    # Pruned keys share files: no record file is left for them.
    assert list((tmp_path / "store" / "records").glob("*/*.json")) == []
    assert run_ledger(url, "doctor").returncode == 0


def test_the_json_selection_reads_without_the_lock(tmp_path: Path) -> None:
    """docs/design.md §5.4: choosing what to prune reads every record; on the JSON store it
    does so without the store lock (each choice is compared again under it),
    so it finds its records while another process holds the lock."""
    from ledger_cli.stores.jsonfile import JsonFileStore

    store = JsonFileStore(tmp_path / "s", lock_timeout=0.2)
    led = _setup(store)
    holder = JsonFileStore(tmp_path / "s")
    with holder._locked(create=False):
        chosen = prune.select(store, LEASE, (), LATER)
        with pytest.raises(LedgerError):  # the lock is held indeed
            led.admit("t", "new", 1, None, LATER)
    assert [r.key for r in chosen] == ["done", "lost"]  # "bad" is named by "stuck"


def test_doctor_takes_a_task_blocked_by_a_pruned_failure_as_blocked(url: str) -> None:
    """A task admitted after its need failed and was pruned is blocked by
    that failure (design.md §6.4), not an orphaned block: doctor says nothing,
    on every store, through fresh `ledger` processes."""
    from tests.cli_support import ledger_ok

    ledger_ok(url, "admit", "a")
    fence = ledger_ok(url, "claim", "a", "--owner", "o", "--lease", "1m").strip()
    ledger_ok(url, "complete", "a", "--owner", "o", "--fence", fence, "--failed")
    ledger_ok(url, "prune", "--older-than", "1s", "--now", "2030-01-01T00:00:00Z")
    ledger_ok(url, "admit", "b", "--needs", "a")
    state = json.loads(ledger_ok(url, "state", "b", "--json"))
    assert (state["Status"], state["BlockedBy"]) == ("blocked", "a")
    for args in (("doctor",), ("doctor", "--fix"), ("doctor",)):
        done = run_ledger(url, *args)
        assert done.returncode == 0, (args, done.stdout)
        assert "orphaned" not in done.stdout, done.stdout
