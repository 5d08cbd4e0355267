"""`ledger log --follow`: history lines as they are written, through the CLI
as real processes on every store another process can write to; the followers
themselves (a prune's rewrite of history.jsonl, PostgreSQL's ids that commit
out of order). Waits are for lines and states, never times."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ledger_cli.engine.history import HistoryEntry
from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

HANG = 60.0  # a bound for a hung test, never a timing assertion


class Follow:
    """A `ledger log --follow` process and the lines it printed, read by a thread.

    The store is made first (a record admitted): a follow of a store that is
    not there yet exits 9 at once, and it would when it started before the
    test's first write."""

    def __init__(self, url: str, *args: str) -> None:
        made = run_ledger(url, "admit", "follow-seed")
        assert made.returncode == 0, made.stderr
        self.proc = subprocess.Popen(
            [*ledger_cmd(), "--store", url, "log", "--follow", *args],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next(self, timeout: float = HANG) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout:g}s") from None

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=HANG)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def _complete(url: str, key: str) -> None:
    assert run_ledger(url, "admit", key).returncode == 0
    fence = run_ledger(url, "claim", key, "--owner", "w", "--lease", "1m")
    assert fence.returncode == 0, fence.stderr
    done = run_ledger(url, "complete", key, "--owner", "w", "--fence", fence.stdout.strip())
    assert done.returncode == 0, done.stderr


def _started(url: str, follow: Follow) -> None:
    """Complete probe tasks until the follower prints one: it is following."""
    for n in range(100):
        _complete(url, f"probe-{n}")
        try:
            line = follow.next(timeout=0.5)  # a probe the follower missed: try another
        except AssertionError:
            continue
        assert json.loads(line)["key"].startswith("probe-")
        while True:  # probes it printed late
            try:
                follow.next(timeout=0.5)
            except AssertionError:
                return
    raise AssertionError("the follower printed no probe")


def test_follow_prints_completions_as_they_are_written(url: str) -> None:
    follow = Follow(url, "--jsonl", "--event", "ledger.completed")
    try:
        _started(url, follow)
        for key in ("a", "b"):
            _complete(url, key)
        got = [json.loads(follow.next()) for _ in range(2)]
        assert [(d["key"], d["event"]) for d in got] == [
            ("a", "ledger.completed"),
            ("b", "ledger.completed"),
        ]
        assert set(got[0]) == {"time", "actor", "event", "key", "fence", "data"}
    finally:
        code, err = follow.stop()
    assert (code, err) == (0, "")  # SIGINT ends a follow: exit 0, no traceback


def test_follow_text_lines_and_event_filter(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    follow = Follow(store, "--event", "ledger.completed", "--event", "ledger.admitted")
    try:
        _started_text(store, follow)
        assert run_ledger(store, "admit", "x").returncode == 0
        line = follow.next()
        assert line.split()[2:4] == ["ledger.admitted", "x"]
    finally:
        code, err = follow.stop()
    assert (code, err) == (0, "")


def _started_text(url: str, follow: Follow) -> None:
    for n in range(100):
        assert run_ledger(url, "admit", f"probe-{n}").returncode == 0
        try:
            follow.next(timeout=0.5)
        except AssertionError:
            continue
        while True:
            try:
                follow.next(timeout=0.5)
            except AssertionError:
                return
    raise AssertionError("the follower printed no probe")


def test_follow_with_json_is_a_usage_error(tmp_path: Path) -> None:
    res = run_ledger(tmp_path / "store", "--json", "log", "--follow")
    assert res.returncode == 2
    assert res.stderr == "ledger: log --follow prints a line at a time: give --jsonl, not --json\n"


def test_event_filters_the_log(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _complete(str(store), "a")
    res = run_ledger(store, "log", "--jsonl", "--event", "ledger.claimed")
    assert res.returncode == 0, res.stderr
    assert [json.loads(line)["event"] for line in res.stdout.splitlines()] == ["ledger.claimed"]


@pytest.mark.parametrize("follow", [(), ("--follow",)])
def test_an_unknown_event_is_a_usage_error_naming_the_known_ones(
    tmp_path: Path, follow: tuple[str, ...]
) -> None:
    store = tmp_path / "store"
    _complete(str(store), "a")
    events = ("--event", "ledger.completed", "--event", "ledger.complete")
    res = run_ledger(store, "log", *follow, *events)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.startswith('ledger: unknown --event "ledger.complete": one of ')
    assert res.stderr.count("\n") == 1 and "ledger.completed, " in res.stderr
    assert res.stderr.endswith(", ledger.paused, ledger.resumed, ledger.restored, ledger.dropped\n")


def _entry(n: int) -> HistoryEntry:
    return HistoryEntry("2026-01-02T03:04:05Z", "t", "ledger.admitted", f"k{n}", 0, f"line {n}")


def _line(n: int) -> bytes:
    return (_entry(n).to_json() + "\n").encode()


def test_json_follower_reads_from_its_offset_and_survives_a_rewrite(tmp_path: Path) -> None:
    """Appends are read from the offset (a line without its newline waits);
    a prune-style rewrite (same lines but dropped ones, new name, then an
    append) goes on after the last line returned."""
    from ledger_cli.stores.jsonfile.historyfollow import HistoryFollower

    root = tmp_path / "store"
    root.mkdir()
    hist = root / "history.jsonl"
    hist.write_bytes(_line(0) + _line(1))
    follower = HistoryFollower(str(root))
    try:
        assert follower.poll() == []  # what was there before is not followed
        with hist.open("ab") as fh:
            fh.write(_line(2) + _line(3)[:10])  # 3 is being appended
        assert [e.key for e in follower.poll()] == ["k2"]
        with hist.open("ab") as fh:
            fh.write(_line(3)[10:])
        assert [e.key for e in follower.poll()] == ["k3"]
        with hist.open("ab") as fh:
            fh.write(_line(4))  # in the old file, not yet read, when the rewrite comes
        new = tmp_path / "new"
        new.write_bytes(_line(1) + _line(2) + _line(3) + _line(4) + _line(5))  # 0 pruned
        os.rename(new, hist)
        assert [e.key for e in follower.poll()] == ["k4", "k5"]
        with hist.open("ab") as fh:
            fh.write(_line(6))
        assert [e.key for e in follower.poll()] == ["k6"]
    finally:
        follower.close()


def test_json_follower_of_a_store_without_history_yet(tmp_path: Path) -> None:
    from ledger_cli.stores.jsonfile.historyfollow import HistoryFollower

    root = tmp_path / "store"
    follower = HistoryFollower(str(root))
    assert follower.poll() == []
    root.mkdir()
    (root / "history.jsonl").write_bytes(_line(0))
    assert [e.key for e in follower.poll()] == ["k0"]
    follower.close()


class _Table:
    """`ledger_history` as the follower's queries see it: the rows committed."""

    def __init__(self) -> None:
        self.rows: dict[int, HistoryEntry] = {}

    def fetch(self, sql: str, args: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        if sql.startswith("SELECT COALESCE(MAX(id), 0)"):
            return [(max(self.rows, default=0),)]
        if "ANY" in sql:
            last, gaps, limit = args
        else:
            (last, limit), gaps = args, []
        ids = sorted(i for i in self.rows if i > last or i in gaps)[:limit]
        return [(i, *self.rows[i].to_obj().values()) for i in ids]


def test_sql_follower_prints_a_row_that_commits_after_a_higher_id() -> None:
    """PostgreSQL: id 2's transaction commits after id 3's: the follower
    reads 3, then asks for 2 again and prints it when it commits."""
    from ledger_cli.stores.sql.historyfollow import SqlHistoryFollower

    table = _Table()
    table.rows[1] = _entry(1)
    follower = SqlHistoryFollower(table.fetch, "%s", gap_wait=3600.0)
    assert follower.poll() == []
    table.rows[3] = _entry(3)
    assert [e.key for e in follower.poll()] == ["k3"]
    table.rows[2] = _entry(2)
    table.rows[4] = _entry(4)
    assert [e.key for e in follower.poll()] == ["k2", "k4"]
    assert follower.poll() == []


def test_sql_follower_without_gap_wait_goes_by_id_alone() -> None:
    from ledger_cli.stores.sql.historyfollow import SqlHistoryFollower

    table = _Table()
    follower = SqlHistoryFollower(table.fetch, "?")
    table.rows[1] = _entry(1)
    table.rows[3] = _entry(3)
    assert [e.key for e in follower.poll()] == ["k1", "k3"]
    table.rows[2] = _entry(2)  # SQLite never shows this (one writer, ids in order)
    assert follower.poll() == []


def test_follow_on_the_memory_store_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli_support import make_cli

    out = make_cli(monkeypatch)("log", "--follow")
    assert out.code == 2
    assert out.stderr == (
        "ledger: log --follow needs a store that other processes write to (not memory:)\n"
    )
