"""`ledger list` on a real terminal (tmux): the table fits the window, and
a long key is folded over lines, never cut with `…`, as `watch` draws it.

Every wait is for a state of the screen (a line appearing), bounded only to
fail a hung test.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger
from tests.tmux_support import Tmux, tmux_server

KEYS = [f"long-key-without-any-spaces-at-all-number-{n}" for n in (1, 2)]
"""Keys that differ only at their end: cut, they would look the same."""


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    yield from tmux_server()


def key_cells(screen: str) -> list[str]:
    """The key column of the table below its rule: a line with other cells
    starts a row, a line of one word goes on the key above it."""
    body = screen.split("─\n", 1)[1].split("EXIT=", 1)[0]
    keys: list[str] = []
    for line in body.splitlines():
        words = line.split()
        if len(words) > 1 and not line.startswith(" "):
            keys.append(words[0])
        elif len(words) == 1 and keys:
            keys[-1] += words[0]
    return keys


@pytest.mark.parametrize("width", [40, 80, 200])
def test_long_keys_are_folded_never_cut(tmux: Tmux, tmp_path: Path, width: int) -> None:
    store = tmp_path / "store"
    for key in KEYS:
        assert run_ledger(store, "admit", key).returncode == 0
    listing = shlex.join([*ledger_cmd(), "--store", str(store), "list"])
    script = f"{listing}; echo EXIT=$?; sleep 600"
    tmux("new-session", "-d", "-s", tmux.session, "-x", str(width), "-y", "60", "sh", "-c", script)
    screen = tmux.wait_for("EXIT=0")
    assert key_cells(screen) == KEYS, screen
    assert "…" not in "".join(line.split()[0] for line in screen.splitlines() if line.strip())
    # Into a pipe nothing changes: the table is as wide as its content, the
    # JSON forms name each key whole.
    piped = run_ledger(store, "list")
    assert [line.split()[0] for line in piped.stdout.splitlines()[2:]] == KEYS
    assert [r["Key"] for r in json.loads(run_ledger(store, "--json", "list").stdout)] == KEYS
    jsonl = run_ledger(store, "list", "--jsonl").stdout.splitlines()
    assert [json.loads(line)["Key"] for line in jsonl] == KEYS
