"""A transaction the store rolled back to break a deadlock is run again by whoever
opened it (engine/rerun.py): `ledger` per command, `Ledger` for the batch of an
operation that may block, and the PostgreSQL store for a lone statement.

Real deadlocks on PostgreSQL (a second connection that locks the rows the
operation needs in the opposite order, its own deadlock_timeout long so that
the ledger's transaction is the one PostgreSQL rolls back), and injected
conflicts on every store: the operation lands once, its events and history
lines once, and the error of the last attempt is what a caller finally sees.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ledger_cli.cli.context import Session, Settings
from ledger_cli.engine import rerun
from ledger_cli.engine.events import Recorder
from ledger_cli.engine.instant import Instant
from ledger_cli.engine.ledger import Ledger
from ledger_cli.engine.memstore import MemStore
from ledger_cli.errors import StoreConflictError
from tests.cli_support import ledger_cmd, subprocess_env
from tests.stores import KINDS
from tests.timing_support import wait_until

T0 = Instant.parse("2026-01-01T00:00:00Z")
COMPLETE_B_FAILED = ("complete", "b", "--owner", "w1", "--fence", "1", "--failed")


# -- a real deadlock on PostgreSQL ------------------------------------------------------


@pytest.fixture
def pg_url(tmp_path: Path) -> Iterator[str]:
    """A postgresql:// URL (as `--store` takes it) on a fresh schema."""
    with KINDS["postgresql"].place(tmp_path) as url:
        yield url


def _waiting_backends(url: str, me: int) -> int:
    """Backends of this database other than `me` waiting for a row lock."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> %s AND wait_event_type = 'Lock'",
            (me,),
        ).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def opposite_order_locker(url: str, first: str, then: str) -> Iterator[threading.Event]:
    """A connection holding row `first` locked; once some other backend waits for
    it (holding `then`, in the ledger's transaction), it asks for `then`:
    a cycle. Its deadlock_timeout is long, so PostgreSQL rolls the other one
    back; it then gets `then`, and commits. The event is set after the commit."""
    import psycopg

    done = threading.Event()
    errors: list[BaseException] = []
    conn = psycopg.connect(url)
    conn.execute("SET deadlock_timeout = '60s'")
    conn.execute("SELECT 1 FROM ledger_tasks WHERE key = %s FOR UPDATE", (first,))
    me = conn.info.backend_pid

    def second_lock() -> None:
        try:
            wait_until(lambda: _waiting_backends(url, me) > 0, timeout=60, what="a waiter")
            conn.execute("SELECT 1 FROM ledger_tasks WHERE key = %s FOR UPDATE", (then,))
            conn.commit()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            conn.rollback()
        finally:
            done.set()

    thread = threading.Thread(target=second_lock, daemon=True)
    thread.start()
    try:
        yield done
    finally:
        thread.join(timeout=90)
        conn.close()
    assert not errors, errors


def _admit_chain(url: str) -> None:
    """`b` claimed by w1, `a` needing `b`: failing `b` locks b, then blocks a."""
    from ledger_cli.stores.sql.postgres import PostgresStore

    with PostgresStore(url) as store:
        ledger = Ledger(store)
        ledger.admit("t", "b", 1, None, T0)
        ledger.admit("t", "a", 1, None, T0, "b")
        assert ledger.claim("t", "b", "w1", timedelta(minutes=5), T0) == 1


def test_a_deadlocked_command_is_run_again_and_lands_once(pg_url: str) -> None:
    _admit_chain(pg_url)
    with opposite_order_locker(pg_url, first="a", then="b") as done:
        proc = subprocess.run(
            [*ledger_cmd(), "--store", pg_url, "--now", str(T0), *COMPLETE_B_FAILED],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            timeout=120,
            check=False,
        )
        assert done.is_set()
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "failed b\n", "")
    log = subprocess.run(
        [*ledger_cmd(), "--store", pg_url, "log"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=True,
    ).stdout
    events = [line.split()[2] for line in log.splitlines() if line.split()[3] in ("a", "b")]
    # The rolled-back attempt left no line: one completion, one block.
    assert events.count("ledger.completed") == 1
    assert events.count("ledger.blocked") == 1
    from ledger_cli.stores.sql.postgres import PostgresStore

    with PostgresStore(pg_url) as store:
        a, b = store.load("a"), store.load("b")
    assert a is not None and b is not None
    assert (b.status, a.status, a.blocked_by) == ("failed", "blocked", "b")


def test_a_deadlocked_library_call_is_run_again_and_its_events_fire_once(pg_url: str) -> None:
    """Outside a batch, `Ledger.complete(..., "failed")` opens one of its own
    (engine/serial.py); rolled back, it is run again, its events after the commit."""
    from ledger_cli.stores.sql.postgres import PostgresStore

    _admit_chain(pg_url)
    bus = Recorder()
    with opposite_order_locker(pg_url, first="a", then="b") as done:
        with PostgresStore(pg_url) as store:
            Ledger(store, bus).complete("t", "b", "w1", 1, "failed", T0)
            a = store.load("a")
        assert done.is_set()
    assert a is not None and (a.status, a.blocked_by) == ("blocked", "b")
    assert [(e.name, e.key) for e in bus.events] == [
        ("ledger.completed", "b"),
        ("ledger.blocked", "a"),
    ]


# -- injected conflicts, on the in-memory store ------------------------------------------


class ConflictingCommits(MemStore):
    """A MemStore whose outermost batch fails `fail` times at the commit, with
    what it wrote undone (as a rolled-back transaction)."""

    def __init__(self, fail: int) -> None:
        super().__init__()
        self.fail = fail
        self.commits = 0
        self._depth = 0

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        self._depth += 1
        try:
            if self._depth > 1:
                yield
                return
            saved = {rec.key: rec for rec in self.range()}
            saved_history = list(self._history)
            with super().batch():
                yield
            self.commits += 1
            if self.fail > 0:
                self.fail -= 1
                for key in [rec.key for rec in self.range()]:
                    if key not in saved:
                        self._tasks.pop(key)
                self._tasks.update(saved)
                self._history = saved_history
                raise StoreConflictError("ledger: injected deadlock; nothing was written")
        finally:
            self._depth -= 1


@pytest.fixture
def no_pause(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def test_a_command_unit_rolled_back_at_its_commit_runs_again(no_pause: list[float]) -> None:
    store = ConflictingCommits(fail=2)
    with Session(Settings(actor="op", now=str(T0)), store=store) as s:
        for attempt in s.writes(T0):
            with attempt:
                admitted = s.ledger.admit(s.actor, "k", 1, {"n": 1}, T0)
        history = list(store.read_history())
    assert admitted is True  # the landed run's answer, not a duplicate of a rolled-back one
    assert store.commits == 3 and len(no_pause) == 2
    assert [(e.event, e.key) for e in history] == [("ledger.admitted", "k")]
    assert [e.name for e in s.recorder.events] == ["ledger.admitted"]


def test_the_last_attempts_conflict_reaches_the_caller(no_pause: list[float]) -> None:
    store = ConflictingCommits(fail=rerun.ATTEMPTS)
    with Session(Settings(actor="op", now=str(T0)), store=store) as s:
        with pytest.raises(StoreConflictError, match="injected deadlock"):
            for attempt in s.writes(T0):
                with attempt:
                    s.ledger.admit(s.actor, "k", 1, None, T0)
        assert store.load("k") is None
        assert s.recorder.events == []
    assert store.commits == rerun.ATTEMPTS


def test_a_refusal_is_not_run_again(no_pause: list[float]) -> None:
    from ledger_cli.errors import NoKeyError

    store = ConflictingCommits(fail=0)
    with Session(Settings(actor="op", now=str(T0)), store=store) as s, pytest.raises(NoKeyError):
        for attempt in s.writes(T0):
            with attempt:
                s.ledger.cancel(s.actor, "nobody", T0, None)
    assert store.commits == 1 and no_pause == []


def test_rerun_pauses_are_random_and_bounded() -> None:
    pauses = [rerun.pause(n) for n in range(rerun.ATTEMPTS) for _ in range(50)]
    assert all(0.0 <= p <= 0.5 for p in pauses)
    assert len(set(pauses)) > 100


def test_the_command_line_says_exit_9_when_every_attempt_is_rolled_back(
    tmp_path: Path,
) -> None:
    """Through `ledger` itself: the documented exit code and one line."""
    script = tmp_path / "conflicts.py"
    script.write_text(
        "import sys, time\n"
        "from ledger_cli.cli import context\n"
        "from tests.storage.test_rerun import ConflictingCommits\n"
        "time.sleep = lambda s: None\n"
        "context.open_store = lambda url, *a: ConflictingCommits(fail=100)\n"
        "from ledger_cli.cli.app import main\n"
        "sys.argv = ['ledger', '--json', 'admit', 'k']\n"
        "main()\n"
    )
    proc = subprocess.run(
        [ledger_cmd()[0], str(script)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 9, proc.stderr
    assert '"code":"store"' in proc.stdout and "injected deadlock" in proc.stdout


class ClockedCommits(ConflictingCommits):
    """A store with `now_with` (as PostgresStore has): a clock read in the batch."""

    def __init__(self, fail: int) -> None:
        super().__init__(fail=fail)
        self.clock_reads: list[tuple[str, Instant]] = []

    def now_with(self, key: str) -> Instant:
        now = T0 + timedelta(seconds=len(self.clock_reads) + 1)
        self.clock_reads.append((key, now))
        return now


def test_a_unit_left_its_now_reads_the_clock_again_when_run_again(
    no_pause: list[float],
) -> None:
    """`writes(None)`: each run takes its now inside its own batch; the landed
    run's writes and history carry its now, not a rolled-back run's."""
    store = ClockedCommits(fail=1)
    with Session(Settings(actor="op"), store=store) as s:
        now = s.unit_now()
        assert now is None
        for attempt in s.writes(now, "now_with"):
            with attempt:
                assert attempt.now is None  # nothing carried over from a rolled-back run
                s.ledger.admit(s.actor, "k", 1, None, attempt.clock("k"))
        history = list(store.read_history())
    landed = T0 + timedelta(seconds=2)
    assert store.clock_reads == [("k", T0 + timedelta(seconds=1)), ("k", landed)]
    rec = store.load("k")
    assert rec is not None and rec.created_at == landed
    assert [(e.event, e.time) for e in history] == [("ledger.admitted", str(landed))]


def test_now_given_wins_over_the_store_clock_in_a_unit(no_pause: list[float]) -> None:
    store = ClockedCommits(fail=0)
    with Session(Settings(actor="op", now=str(T0)), store=store) as s:
        now = s.unit_now()
        assert now == T0
        for attempt in s.writes(now, "now_with"):
            with attempt:
                s.ledger.admit(s.actor, "k", 1, None, attempt.clock("k"))
    assert store.clock_reads == []
    assert [e.time for e in store.read_history()] == [str(T0)]


def test_a_store_without_the_hook_gets_its_now_inside_the_unit() -> None:
    """The unit reads the clock once its batch (the store's write lock) is
    entered, not before: a lease is not granted from a time spent waiting."""
    store = MemStore()
    entered: list[bool] = []
    batch = store.batch

    def watched() -> contextlib.AbstractContextManager[None]:
        entered.append(True)
        return batch()

    store.batch = watched  # type: ignore[method-assign]
    with Session(Settings(actor="op"), store=store) as s:
        assert s.unit_now() is None
        for attempt in s.writes(s.unit_now(), "now_with"):
            with attempt:
                assert entered and attempt.now is not None
