"""`list` and `watch` on narrow terminals (tmux; docs/design.md §6.6): the
key always shows, whole (folded over lines when it must be), and every
column drawn is whole too; the columns a window cannot hold are left out,
least needed first, rather than every column squeezed to `…`.

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

LONG = "long-key-without-any-spaces-number-1"
STAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\b")

HEADERS = {  # the columns each width holds, for these records
    20: ["key", "status"],
    40: ["key", "status", "seq", "owner", "lease"],
    80: ["key", "status", "seq", "owner", "fence", "lease", "blocked", "updated"],
}


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def table_of(screen: str) -> tuple[list[str], list[str]]:
    """The table's header words (over its lines) and the key column of its
    rows, a key folded over lines put back together (a row starts at a
    line with a status in it)."""
    head, body = screen.split("─\n", 1)
    words = " ".join(head.splitlines()[:-1][-2:]).split()  # the lines above the rule
    keys: list[str] = []
    for line in body.split("EXIT=", 1)[0].splitlines():
        if not line.strip() or line.startswith("…"):
            continue
        cell = line.split("  ", 1)[0].strip()
        if "pending" in line or "claimed" in line:
            keys.append(cell)
        elif keys:
            keys[-1] += cell
    return words, keys


def seeded(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    for key in ("report", LONG):
        assert run_ledger(store, "admit", key).returncode == 0
    assert run_ledger(store, "claim", "report", "--owner", "w1", "--lease", "1h").returncode == 0
    return store


def shown(tmux: Tmux, width: int, argv: list[str], until: str) -> str:
    script = f"{shlex.join(argv)}; echo EXIT=$?; sleep 600"
    size = ["-x", str(width), "-y", "50"]
    tmux("new-session", "-d", "-s", tmux.session, *size, "sh", "-c", script)
    return tmux.wait_for(until)


def check(screen: str, width: int) -> None:
    words, keys = table_of(screen)
    assert keys == ["report", LONG] or keys == [LONG, "report"], screen
    assert set(words) - {"left", "by"} == set(HEADERS[width]), screen  # a header may take 2 lines
    assert "…" not in screen, screen  # nothing cut: not a key, a status, a time
    assert ("claimed" in screen) and ("pending" in screen), screen
    assert bool(STAMP.search(screen)) == ("updated" in words), screen


@pytest.mark.parametrize("width", [20, 40, 80])
def test_list_keeps_the_key_and_whole_columns(tmux: Tmux, tmp_path: Path, width: int) -> None:
    store = seeded(tmp_path)
    screen = shown(tmux, width, [*ledger_cmd(), "--store", str(store), "list"], "EXIT=0")
    check(screen, width)


@pytest.mark.parametrize("width", [20, 40, 80])
def test_watch_keeps_the_key_and_whole_columns(tmux: Tmux, tmp_path: Path, width: int) -> None:
    store = seeded(tmp_path)
    argv = [*ledger_cmd(), "--store", str(store), "watch", "--interval", "0.2s"]
    screen = shown(tmux, width, argv, "oldest ready")
    # the header and the stats above the table wrap at this width: look below them
    check(screen[screen.index("oldest ready") :], width)
    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_for("EXIT=0")
