"""`ledger watch` (docs/design.md §6.6) in a real pseudo-terminal (tmux: send-keys and
capture-pane), and its refusal outside a terminal.

Every wait is for a state of the screen (a line appearing), bounded only to
fail a hung test.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger
from tests.tmux_support import BOUND, Tmux, tmux_server


def test_refuses_outside_a_terminal(tmp_path: Path) -> None:
    res = run_ledger(tmp_path / "store", "watch")
    assert res.returncode == 2
    assert res.stderr == "ledger: watch needs a terminal (use list or stats)\n"
    assert res.stdout == ""
    bad = run_ledger(tmp_path / "store", "watch", "--status", "nope")
    assert bad.returncode == 2 and "unknown status" in bad.stderr


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


@pytest.mark.parametrize("leave", ["q", "C-c"])
def test_live_view_refreshes_and_leaves_cleanly(tmux: Tmux, tmp_path: Path, leave: str) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "first-task").returncode == 0
    watch = shlex.join([*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s"])
    # The shell survives the Ctrl-C (a trap, not an ignore: watch gets SIGINT).
    script = (
        "trap 'true' INT; "
        f"stty -a | grep -o -- '-\\?icanon' > {tmp_path}/before; "
        f"{watch}; echo EXIT=$?; "
        f"stty -a | grep -o -- '-\\?icanon' > {tmp_path}/after; sleep 600"
    )
    tmux("new-session", "-d", "-s", tmux.session, "-x", "150", "-y", "40", "sh", "-c", script)
    screen = tmux.wait_for("first-task")
    assert "ledger watch" in screen and "ready 1" in screen
    # The view re-reads the store: a task admitted now shows up.
    assert run_ledger(store, "admit", "second-task", "--needs", "first-task").returncode == 0
    tmux.wait_for("second-task")
    tmux("send-keys", "-t", tmux.session, leave)
    screen = tmux.wait_for("EXIT=0")
    # The alternate screen is gone, and the keyboard mode is back.
    assert "ledger watch" not in screen and "first-task" not in screen
    deadline = time.monotonic() + BOUND
    after = tmp_path / "after"
    while not (after.exists() and after.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert after.read_text() == (tmp_path / "before").read_text() == "icanon\n"


def test_queue_shows_those_queues_tasks_and_figures(tmux: Tmux, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key, queue in (("db-task", "db"), ("mail-task", "mail"), ("plain-task", "default")):
        assert run_ledger(store, "admit", key, "--queue", queue).returncode == 0
    assert run_ledger(store, "limit", "db", "2").returncode == 0
    assert run_ledger(store, "claim", "db-task", "--owner", "w", "--lease", "1h").returncode == 0
    watch = [*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s"]
    script = shlex.join([*watch, "--queue", "db,nowhere"]) + "; sleep 600"
    tmux("new-session", "-d", "-s", tmux.session, "-x", "150", "-y", "40", "sh", "-c", script)
    screen = tmux.wait_for("db-task")
    assert "queue db: pending 0  claimed 1  ready 0  held 1 of 2" in screen
    assert "queue nowhere: no tasks" in screen
    assert "mail-task" not in screen and "plain-task" not in screen
    tmux("send-keys", "-t", tmux.session, "q")
