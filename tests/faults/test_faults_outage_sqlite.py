"""`ledger run` when SQLite's write lock is held by a second connection (as a
Go writer holds it) past the busy timeout (5 s): an outage like a PostgreSQL
restart (the PostgreSQL side is tests/faults/test_faults_outage.py).
Every wait is for a state; the leases are chosen against the busy timeout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_support import ledger_ok
from tests.outage_runs import (
    Ledger,
    Runs,
    admit,
    assert_clean,
    assert_each_once,
    assert_ours,
    lease_end,
    lock_sqlite,
)
from tests.timing_support import wait_until


def test_sqlite_lock_past_the_busy_timeout_is_ridden_out(tmp_path: Path) -> None:
    """A second connection holds the write lock past the busy timeout (5 s),
    once during the command (a renewal fails) and once as it ends (the
    completion fails): both are tried again and land; the command ran once."""
    db = tmp_path / "s.db"
    lease = 15.0  # the busy timeout (5 s) well inside a third of it and the margin
    admit(str(db), "k")
    runs = Runs(tmp_path)
    run = Ledger(
        str(db), "run", "k", "--owner", "o", "--lease", f"{lease:g}s", *runs.command("flag")
    )
    wait_until(lambda: runs.starts() == 1, "the command started")
    first = lease_end(str(db), "k")
    holder = lock_sqlite(db)
    wait_until(lambda: run.saw("renewing k"), "a renewal failed")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    wait_until(lambda: lease_end(str(db), "k") > first, "a renewal landed")
    holder.execute("BEGIN IMMEDIATE")  # type: ignore[attr-defined]
    runs.finish()
    wait_until(lambda: run.saw("recording k"), "the completion failed")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    assert run.wait() == 0, run.stderr
    assert len(run.stderr) == 2, run.stderr  # one line per outage
    assert_ours(run)
    assert_each_once(str(db), runs, ["k"])
    assert_clean(str(db))


def test_sqlite_lock_longer_than_the_lease_stops_the_command(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    lease = 4.0  # shorter than the busy timeout: the first renewal cannot land in time
    admit(str(db), "k")
    runs = Runs(tmp_path)
    run = Ledger(
        str(db), "run", "k", "--owner", "o", "--lease", f"{lease:g}s", *runs.command("600")
    )
    wait_until(lambda: runs.starts() == 1, "the command started")
    holder = lock_sqlite(db)
    assert run.wait() == 5, run.stderr
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    stopped = runs.by_key()["k"][0][1]
    assert stopped is not None and stopped < lease_end(str(db), "k")
    assert_ours(run)


def test_sqlite_drain_waits_out_the_lock(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    keys = ["a", "b", "c"]
    admit(str(db), *keys)
    runs = Runs(tmp_path)
    holder = lock_sqlite(db)
    drain = Ledger(
        str(db), "run", "--next", "--drain", "--owner", "o", "--lease", "10s", *runs.command("0")
    )
    wait_until(lambda: drain.saw("trying again"), "the drain met the lock")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    assert drain.wait() == 0, drain.stderr
    assert len(drain.stderr) == 1, drain.stderr
    assert_ours(drain)
    assert_each_once(str(db), runs, keys)


def test_sqlite_lock_past_the_busy_timeout_is_an_outage(tmp_path: Path) -> None:
    from ledger_cli.errors import StoreUnavailableError
    from ledger_cli.stores.sql.sqlite import SQLiteStore

    db = tmp_path / "s.db"
    with SQLiteStore(db, busy_timeout=0.05) as store:
        holder = lock_sqlite(db)
        with pytest.raises(StoreUnavailableError, match="locked"), store.batch():
            pass
        holder.execute("ROLLBACK")  # type: ignore[attr-defined]
        with store.batch():
            pass


def test_a_warning_about_the_lock_carries_ledger_once(tmp_path: Path) -> None:
    """The output's flush that meets the lock past the busy timeout warns in one
    line that wraps the store's error, `ledger:` once (docs/design.md §4.5): not
    `ledger: recording the output of k: ledger: sqlite begin …`."""
    db = tmp_path / "s.db"
    admit(str(db), "k")
    go, end = tmp_path / "go", tmp_path / "end"
    script = (
        f'echo one; while [ ! -e "{go}" ]; do sleep 0.02; done;'
        f' echo two; while [ ! -e "{end}" ]; do sleep 0.02; done'
    )
    run = Ledger(str(db), "run", "k", "--owner", "o", "--lease", "15s", "--", "sh", "-c", script)
    # "one" kept: the attempt and its pid are recorded, the flushes land
    wait_until(lambda: "one" in ledger_ok(db, "output", "k"), "the first flush")
    holder = lock_sqlite(db)
    go.touch()  # "two": the next flush meets the lock
    wait_until(lambda: run.saw("recording the output of k"), "the flush failed")
    holder.execute("ROLLBACK")  # type: ignore[attr-defined]
    end.touch()
    assert run.wait() == 0, run.stderr
    (line,) = [line for line in run.stderr if "recording the output" in line]
    assert line.startswith("ledger: recording the output of k: sqlite "), line
    assert line.count("ledger:") == 1, line
    assert line.endswith("(the command goes on)"), line
