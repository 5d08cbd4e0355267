"""Keys on narrow terminals (tmux; docs/design.md §6.6): every rich view that
shows a key folds it over lines whole, never cut with `…`, so two long keys
that differ at their end never look the same: `state`'s title (or its `key`
row when the title would not fit), its needs and its `blocked by`; `tree`'s
labels; `list`'s and `watch`'s key column. An escape shown for an untrusted
character (`\\u200d`) is never split across two lines.

Every wait is for a state of the screen (a line appearing), bounded only to
fail a hung test.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger
from tests.tmux_support import Tmux, tmux_server

A = "build-artifacts-for-the-release-candidate-A"
B = "build-artifacts-for-the-release-candidate-B"
LONG = "root-failing-task-with-a-rather-long-key-indeed"
JOINED = "fam-\U0001f467\u200d\U0001f466-and-some-more-words-to-fold"
"""A key with a zero-width joiner, which every view shows as `\\u200d`."""
TREE = "the-family-tree-a\U0001f467\u200d\U0001f466-and-more"
"""Its escape starts at the 20th cell: rich alone folded it at 20 and 24 cells."""
JOINED_SHOWN = "fam-\U0001f467\\u200d\U0001f466-and-some-more-words-to-fold"
FRAME = re.compile(r"[\s│╭╮╰╯─└├┬┴┼]+")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`deploy` needs A (failed), B and JOINED, so it is blocked by A; LONG
    needs A. Only read by the tests."""
    store = tmp_path_factory.mktemp("narrow") / "store"
    steps = [
        ["admit", A],
        ["admit", B],
        ["admit", JOINED],
        ["admit", TREE],
        ["admit", "deploy", "--needs", A, "--needs", B, "--needs", JOINED],
        ["admit", LONG, "--needs", A],
        ["claim", A, "--owner", "w", "--lease", "1h"],
        ["complete", A, "--owner", "w", "--fence", "1", "--failed"],
    ]
    for step in steps:
        res = run_ledger(store, *step)
        assert res.returncode == 0, (step, res.stderr)
    return store


def shown(tmux: Tmux, width: int, *argv: str) -> str:
    """The screen of `ledger ARGV…` run in a window `width` cells wide, once it has exited."""
    script = f"{shlex.join(argv)}; echo EXIT=$?; sleep 600"
    size = ["-x", str(width), "-y", "150"]
    tmux("new-session", "-d", "-s", tmux.session, *size, "sh", "-c", script)
    screen = tmux.wait_for("EXIT=")
    assert "EXIT=0" in screen, screen
    return screen.split("EXIT=", 1)[0]


def flat(screen: str) -> str:
    """The screen without its frame, rules and blanks: a key folded over
    lines reads whole again (its lines are next to each other)."""
    return FRAME.sub("", screen)


def escapes_whole(screen: str) -> None:
    """Each `\\u200d` is on one line: as many on the lines as in their join."""
    on_lines = sum(line.count("\\u200d") for line in screen.splitlines())
    assert on_lines == flat(screen).count("\\u200d") >= 1, screen


@pytest.mark.parametrize("width", [20, 30, 40, 50])
def test_state_folds_needs_and_blocked_by_whole(tmux: Tmux, store: Path, width: int) -> None:
    screen = shown(tmux, width, *ledger_cmd(), "--store", str(store), "state", "deploy")
    text = flat(screen)
    assert text.count(A) == 2, screen  # a need, and what blocks it
    assert B in text and JOINED_SHOWN in text, screen
    escapes_whole(screen)


@pytest.mark.parametrize("width", [20, 30, 40, 50])
def test_state_shows_a_key_too_long_for_its_title_whole(
    tmux: Tmux, store: Path, width: int
) -> None:
    screen = shown(tmux, width, *ledger_cmd(), "--store", str(store), "state", LONG)
    assert LONG in flat(screen), screen
    assert "…" not in screen.split("created", 1)[0], screen  # nothing above the times is cut


@pytest.mark.parametrize("width", [20, 24])
@pytest.mark.parametrize("command", [["list"], ["tree", TREE]])
def test_a_folded_key_keeps_each_escape_whole(
    tmux: Tmux, store: Path, width: int, command: list[str]
) -> None:
    screen = shown(tmux, width, *ledger_cmd(), "--store", str(store), *command)
    escapes_whole(screen)
    assert "…" not in screen, screen


@pytest.mark.parametrize("width", [20, 24])
def test_watch_keeps_each_escape_whole(tmux: Tmux, store: Path, width: int) -> None:
    argv = [*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s"]
    script = f"{shlex.join(argv)}; echo EXIT=$?; sleep 600"
    tmux("new-session", "-d", "-s", tmux.session, "-x", str(width), "-y", "60", "sh", "-c", script)
    screen = tmux.wait_for("\nroot-")  # the row after JOINED's
    escapes_whole(screen)
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")
