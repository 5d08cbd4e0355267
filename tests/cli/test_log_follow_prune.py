"""`ledger log --follow` beside `ledger prune`: the follower prints every line
still in the history when it reads it, once, and none a prune removed before
it read it, on every store; a JSON store removed while followed ends the
follow. The follower is stopped (SIGSTOP) while the writes it must catch up
on happen: waits are for lines and exits, never times."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from ledger_cli.engine.history import HistoryEntry
from tests.cli.test_log_follow import HANG, Follow, _complete, _started
from tests.cli_support import run_ledger

LATER = "2999-01-01T00:00:00Z"
"""`--now` of a prune that takes every finished record, however fast the test runs."""


def _prune(url: str) -> None:
    res = run_ledger(url, "--now", LATER, "prune", "--older-than", "1s")
    assert res.returncode == 0, res.stderr


def _admit(url: str, key: str) -> None:
    res = run_ledger(url, "admit", key)
    assert res.returncode == 0, res.stderr


def _lines_until(follow: Follow, key: str, event: str = "ledger.admitted") -> list[tuple[str, str]]:
    """The (key, event) of each line printed, up to the first of `key`'s `event`."""
    got: list[tuple[str, str]] = []
    while not got or got[-1] != (key, event):
        d = json.loads(follow.next())
        got.append((d["key"], d["event"]))
    return got


def _stopped_follower(url: str) -> Follow:
    """A follower that has printed the lines of `kept` (its last lines), then stopped."""
    follow = Follow(url, "--jsonl")
    _started(url, follow)
    _complete(url, "kept")
    _lines_until(follow, "kept", "ledger.completed")
    follow.proc.send_signal(signal.SIGSTOP)
    return follow


def test_a_prune_while_the_follower_waits(url: str) -> None:
    """The last line the follower printed is pruned, so are lines it never
    read; a line appended after the prune is printed, the pruned ones not."""
    follow = _stopped_follower(url)
    try:
        _complete(url, "gone")  # written and pruned while the follower is stopped
        _prune(url)
        _admit(url, "after")
        follow.proc.send_signal(signal.SIGCONT)
        _admit(url, "marker")
        got = _lines_until(follow, "marker")
    finally:
        follow.proc.send_signal(signal.SIGCONT)
        code, err = follow.stop()
    assert got == [("after", "ledger.admitted"), ("marker", "ledger.admitted")]
    assert (code, err) == (0, "")


def test_prunes_in_a_row_while_the_follower_waits(url: str) -> None:
    follow = _stopped_follower(url)
    try:
        _admit(url, "a1")
        _complete(url, "g1")
        _prune(url)
        _admit(url, "a2")
        _complete(url, "g2")
        _prune(url)
        _admit(url, "a3")
        follow.proc.send_signal(signal.SIGCONT)
        _admit(url, "marker")
        got = _lines_until(follow, "marker")
    finally:
        follow.proc.send_signal(signal.SIGCONT)
        code, err = follow.stop()
    assert [k for k, _ in got] == ["a1", "a2", "a3", "marker"]
    assert (code, err) == (0, "")


@pytest.mark.parametrize("recreate", [False, True])
def test_a_json_store_removed_while_followed_ends_the_follow(
    tmp_path: Path, recreate: bool
) -> None:
    store = str(tmp_path / "store")
    follow = Follow(store, "--jsonl")
    _started(store, follow)
    follow.proc.send_signal(signal.SIGSTOP)
    shutil.rmtree(store)
    if recreate:
        _admit(store, "new")
    follow.proc.send_signal(signal.SIGCONT)
    try:
        code = follow.proc.wait(timeout=HANG)
    finally:
        follow.proc.kill()
    assert follow.proc.stderr is not None
    assert code == 9
    assert follow.proc.stderr.read() == (
        f"ledger: no store at {store}: it was removed or replaced while followed\n"
    )


def _line(key: str, data: str = "") -> bytes:
    entry = HistoryEntry("2026-01-02T03:04:05Z", "t", "ledger.renewed", key, 1, data or key)
    return (entry.to_json() + "\n").encode()


def test_json_follower_matches_equal_lines_in_order(tmp_path: Path) -> None:
    """`--now` makes equal lines (one key's): a prune keeps or drops them
    together, and the follower pairs them in order, so an equal line appended
    after the prune is new."""
    from ledger_cli.stores.jsonfile.historyfollow import HistoryFollower

    root = tmp_path / "store"
    root.mkdir()
    hist = root / "history.jsonl"
    hist.write_bytes(b"")
    follower = HistoryFollower(str(root))
    try:
        x, y = _line("x"), _line("y")
        hist.write_bytes(x + y + x)
        assert [e.key for e in follower.poll()] == ["x", "y", "x"]
        with hist.open("ab") as fh:
            fh.write(y)  # never read: pruned with y
        new = tmp_path / "new"
        new.write_bytes(x + x + x + _line("z"))  # y pruned, then x and z appended
        new.rename(hist)
        assert [e.key for e in follower.poll()] == ["x", "z"]
        assert follower.poll() == []
    finally:
        follower.close()


def test_json_follower_of_a_file_emptied_by_a_prune(tmp_path: Path) -> None:
    from ledger_cli.stores.jsonfile.historyfollow import HistoryFollower

    root = tmp_path / "store"
    root.mkdir()
    hist = root / "history.jsonl"
    hist.write_bytes(_line("a"))
    follower = HistoryFollower(str(root))
    try:
        with hist.open("ab") as fh:
            fh.write(_line("u"))  # never read: pruned with a
        new = tmp_path / "new"
        new.write_bytes(b"")
        new.rename(hist)
        assert follower.poll() == []
        with hist.open("ab") as fh:
            fh.write(_line("b") + _line("c")[:5])
        assert [e.key for e in follower.poll()] == ["b"]
    finally:
        follower.close()
