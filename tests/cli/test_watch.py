"""`ledger watch` (docs/design.md §6.6) in a real pseudo-terminal (tmux: send-keys and
capture-pane), and its refusal outside a terminal.

Every wait is for a state of the screen (a line appearing), bounded only to
fail a hung test.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
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


def start_watch(tmux: Tmux, store: Path, *args: str, height: int = 40) -> None:
    """`ledger watch` in a 150-column pane, then its exit status on the screen."""
    watch = shlex.join([*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s", *args])
    script = f"{watch}; echo EXIT=$?; sleep 600"
    tmux(
        "new-session", "-d", "-s", tmux.session, "-x", "150", "-y", str(height), "sh", "-c", script
    )


def wait_gone(tmux: Tmux, text: str) -> str:
    """The screen once `text` has left it."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        screen = tmux.screen()
        if text not in screen:
            return screen
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never left the screen:\n{tmux.screen()}")


@pytest.mark.parametrize("name", ["store", "store.db"])
def test_a_deleted_or_replaced_store_is_named_on_every_refresh(
    tmux: Tmux, tmp_path: Path, name: str
) -> None:
    """A store deleted under the view shows `ledger: no store at …` (never an
    empty ledger, nor the records of a file still held open); a store made
    again at the path is read afresh; leaving while the error stands reports
    it (exit 9)."""
    store = tmp_path / name
    for key in ("old-one", "old-two"):
        assert run_ledger(store, "admit", key).returncode == 0
    start_watch(tmux, store)
    tmux.wait_for("old-two")
    remove = [store, *tmp_path.glob(f"{name}-*")]
    for path in remove:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    screen = tmux.wait_for(f"ledger: no store at {store}")
    assert "ledger watch" in screen and "old-one" not in screen and "pending" not in screen
    assert run_ledger(store, "admit", "fresh-task").returncode == 0
    screen = tmux.wait_for("fresh-task")
    assert "old-one" not in screen and "no store at" not in screen and "pending 1 " in screen
    for path in [store, *tmp_path.glob(f"{name}-*")]:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    tmux.wait_for(f"ledger: no store at {store}")
    tmux("send-keys", "-t", tmux.session, "q")
    screen = tmux.wait_for("EXIT=9")
    assert f"ledger: no store at {store} (the first write creates it)\nEXIT=9" in screen
    assert "ledger watch" not in screen


def test_a_damaged_sqlite_file_shows_sqlites_error(tmux: Tmux, tmp_path: Path) -> None:
    """The file's first pages overwritten under the view: the next refresh
    says what a fresh `stats` says, never the figures it read before."""
    store = tmp_path / "store.db"
    for key in ("task-a", "task-b"):
        assert run_ledger(store, "admit", key).returncode == 0
    start_watch(tmux, store)
    tmux.wait_for("task-b")
    with store.open("r+b") as f:  # dd if=/dev/zero bs=4096 count=3 conv=notrunc
        f.write(bytes(3 * 4096))
    fresh = run_ledger(store, "stats")
    assert fresh.returncode == 9 and "file is not a database" in fresh.stderr
    screen = tmux.wait_for("file is not a database")
    assert "task-a" not in screen and "pending" not in screen
    assert screen.count("ledger: sqlite") == 1
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=9")


def test_a_damaged_record_is_shown_and_the_view_goes_on(tmux: Tmux, tmp_path: Path) -> None:
    """A record that does not decode is the view's error line until it is
    mended (here: the task admitted again after the file is removed)."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "task-a").returncode == 0
    start_watch(tmux, store)
    tmux.wait_for("task-a")
    (record,) = (store / "records").rglob("*.json")
    good = record.read_bytes()
    record.write_bytes(b"{bad")
    screen = tmux.wait_for("corrupt record")
    assert "ledger: store:" in screen and "ledger watch" in screen
    record.write_bytes(good)
    screen = wait_gone(tmux, "corrupt record")
    assert "task-a" in screen
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")


def test_the_pause_banner_shows_format_characters_as_escapes(tmux: Tmux, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "task-a", "--queue", "q\u202e").returncode == 0
    paused = run_ledger(store, "pause", "--reason", "freeze\u202eevil", "--actor", "act\u202e")
    assert paused.returncode == 0
    start_watch(tmux, store, "--queue", "q\u202e")
    screen = tmux.wait_for("PAUSED")
    assert "by act\\u202e: freeze\\u202eevil" in screen
    assert "queue q\\u202e: pending 1" in screen
    assert "\u202e" not in screen
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")


def watch_pid(tmux: Tmux) -> int:
    """The pid of `ledger watch`: the only child of the pane's shell."""
    shell = tmux("display", "-p", "-t", tmux.session, "#{pane_pid}").strip()
    children = Path(f"/proc/{shell}/task/{shell}/children")
    if not children.exists():
        pytest.skip("needs Linux's /proc/PID/task/PID/children")
    (pid,) = children.read_text().split()
    return int(pid)


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT], ids=lambda s: signal.Signals(s).name
)
def test_a_stopping_signal_restores_the_terminal(
    tmux: Tmux, tmp_path: Path, sig: signal.Signals
) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "task-a").returncode == 0
    start_watch(tmux, store)
    tmux.wait_for("task-a")
    assert tmux("display", "-p", "-t", tmux.session, "#{alternate_on} #{cursor_flag}") == "1 0\n"
    os.kill(watch_pid(tmux), sig)
    screen = tmux.wait_for(f"EXIT={128 + sig}")
    assert "task-a" not in screen
    assert tmux("display", "-p", "-t", tmux.session, "#{alternate_on} #{cursor_flag}") == "0 1\n"


def test_a_short_terminal_still_counts_the_rows_it_cannot_show(tmux: Tmux, tmp_path: Path) -> None:
    store = tmp_path / "store"
    lines = "".join(json.dumps({"key": f"task-{n:02}"}) + "\n" for n in range(30))
    assert run_ledger(store, "admit", "--batch", "-", input=lines.encode()).returncode == 0
    start_watch(tmux, store, height=12)
    screen = tmux.wait_for(" more")
    shown = re.findall(r"^task-\d\d ", screen, re.MULTILINE)
    (more,) = re.findall(r"… and (\d+) more", screen)
    assert shown and len(shown) + int(more) == 30
    assert screen.rstrip("\n").splitlines()[-1].startswith("… and")


def test_a_terminal_hung_up_under_the_view_is_no_internal_error(tmux: Tmux, tmp_path: Path) -> None:
    """The pane closed (its shell survives the hangup): the input ends, which
    leaves as q does; the keyboard mode that cannot be restored any more
    (EIO) is no error."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "task-a").returncode == 0
    watch = shlex.join([*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s"])
    script = f"trap true HUP; {watch} 2>{tmp_path}/err; echo $? > {tmp_path}/rc.tmp; "
    script += f"mv {tmp_path}/rc.tmp {tmp_path}/rc"
    tmux("new-session", "-d", "-s", tmux.session, "-x", "150", "-y", "20", "sh", "-c", script)
    tmux("new-window", "-d", "-t", tmux.session)  # keeps the server once the pane is gone
    tmux.wait_for("task-a")
    tmux("kill-window", "-t", f"{tmux.session}:0")
    rc = tmp_path / "rc"
    deadline = time.monotonic() + BOUND
    while not rc.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (rc.read_text(), (tmp_path / "err").read_text()) == ("0\n", "")


def start_sized(tmux: Tmux, store: Path, width: int, height: int, *args: str) -> None:
    """`ledger watch` in a pane of the given size, then its exit status."""
    watch = shlex.join([*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s", *args])
    script = f"{watch}; echo EXIT=$?; sleep 600"
    size = ["-x", str(width), "-y", str(height)]
    tmux("new-session", "-d", "-s", tmux.session, *size, "sh", "-c", script)


WRAPPED = [f"long key number {n} with many words in it to force wrapping" for n in range(9)]


@pytest.mark.parametrize(
    ("keys", "width", "height"),
    [
        (WRAPPED, 80, 40),
        (WRAPPED, 80, 24),
        (WRAPPED, 120, 12),
        ([f"key number {n} two" for n in range(10, 22)], 80, 24),
    ],
    ids=["7-lines-80x40", "7-lines-80x24", "2-lines-120x12", "2-lines-80x24"],
)
def test_rows_a_narrow_window_wraps_fill_the_screen(
    tmux: Tmux, tmp_path: Path, keys: list[str], width: int, height: int
) -> None:
    """Rows of several lines each (long keys with spaces, wrapped): as many
    as fit, measured as drawn, then `… and N more` on the last line that the
    screen needs, with less room left below it than one more row takes."""
    store = tmp_path / "store"
    lines = "".join(json.dumps({"key": key}) + "\n" for key in keys)
    assert run_ledger(store, "admit", "--batch", "-", input=lines.encode()).returncode == 0
    start_sized(tmux, store, width, height)
    screen = tmux.wait_for(" more")
    rows = screen.splitlines()
    starts = [i for i, line in enumerate(rows) if " pending " in line]
    (more,) = re.findall(r"^… and (\d+) more$", screen, re.MULTILINE)
    assert starts, screen
    assert len(starts) + int(more) == len(keys), screen
    row_height = starts[1] - starts[0] if len(starts) > 1 else len(rows)
    last = next(i for i, line in enumerate(rows) if line.startswith("… and"))
    assert last == starts[-1] + row_height, screen  # right under the last row
    assert height - (last + 1) < row_height, screen  # no room left for one more row
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")


def test_long_keys_without_spaces_are_folded_never_cut(tmux: Tmux, tmp_path: Path) -> None:
    """At 80 columns the key column is narrow: a key is folded over lines,
    whole, so keys that differ at their end never look the same."""
    store = tmp_path / "store"
    keys = [f"long-key-without-any-spaces-at-all-number-{n}" for n in range(3)]
    for key in keys:
        assert run_ledger(store, "admit", key).returncode == 0
    start_sized(tmux, store, 80, 40)
    screen = tmux.wait_for("pending 3 ")  # the stats line: the table is drawn with it
    below = screen.split("─\n", 1)[1].splitlines()
    shown: list[str] = []
    for line in below:
        cell = line.split("  ", 1)[0].strip()  # the key column, however wide
        if "pending" in line:
            shown.append(cell)
        elif cell and shown:
            shown[-1] += cell
    assert shown == keys, screen
    assert "…" not in "".join(line[:12] for line in below)
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")


def test_an_empty_table_names_what_was_asked_for(tmux: Tmux, tmp_path: Path) -> None:
    """`--status claimed` with pending work says `no claimed tasks`, never
    `nothing unfinished`; a failure that blocks nothing is not shown."""
    store = tmp_path / "store"
    for key in ("wait-a", "wait-b", "doomed"):
        assert run_ledger(store, "admit", key).returncode == 0
    assert run_ledger(store, "claim", "doomed", "--owner", "w", "--lease", "1h").returncode == 0
    done = run_ledger(store, "complete", "doomed", "--owner", "w", "--fence", "1", "--failed")
    assert done.returncode == 0, done.stderr
    start_sized(tmux, store, 150, 20, "--status", "claimed", "--status", "failed")
    screen = tmux.wait_for("no claimed tasks, and no failed task blocks another")
    assert "nothing unfinished" not in screen and "pending 2 " in screen and "failed 1 " in screen
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")


def test_a_finished_status_is_refused(tmp_path: Path) -> None:
    """`watch --status completed` would never show a row: exit 2, saying why,
    before it looks for a terminal."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "task-a").returncode == 0
    res = run_ledger(store, "watch", "--status", "claimed", "--status", "completed")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == (
        "ledger: watch shows unfinished tasks, never completed ones (use list --status completed)\n"
    )
