"""A KEY argument names any key a store holds (docs/design.md §5.2): only the
commands that create a key (`admit`, `--needs`) refuse one that is not
UTF-8 or holds a control character (exit 2); every other command, `cancel`,
`retry`, `check` and `graph` among them, looks it up like `state` and
`claim` do: a key no store holds is exit 3, one a program stored is found.
Each run is the installed `ledger`, a fresh process.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger_cli import Ledger, open_store
from tests.cli_support import run_sane

NOT_UTF8 = os.fsdecode(b"a\xff")
"""What a shell's $'a\\xff' passes: a byte that is not UTF-8."""

LOOKUPS = [
    ["state", NOT_UTF8],
    ["blocked", NOT_UTF8],
    ["tree", NOT_UTF8],
    ["claim", NOT_UTF8, "--owner", "w", "--lease", "1m"],
    ["cancel", NOT_UTF8],
    ["retry", NOT_UTF8],
    ["check", NOT_UTF8, "--owner", "w", "--fence", "1"],
    ["graph", NOT_UTF8],
]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    assert run_sane(store, "admit", "x").returncode == 0
    return store


def test_a_key_that_is_not_utf8_names_no_record_on_every_lookup(store: Path) -> None:
    """The same answer from every command that looks a key up: exit 3, the
    key shown as every view shows it."""
    got = {args[0]: run_sane(store, *args) for args in LOOKUPS}
    assert {name: res.returncode for name, res in got.items()} == dict.fromkeys(got, 3)
    for res in got.values():
        assert res.stderr == "ledger: key has no record: a\ufffd\n"


def test_admit_refuses_to_create_a_key_that_is_not_utf8(store: Path) -> None:
    res = run_sane(store, "admit", NOT_UTF8)
    assert res.returncode == 2
    assert res.stderr == 'ledger: key "a\\ufffd" is not valid UTF-8\n'


def test_a_key_with_a_control_character_a_program_stored_is_reachable(store: Path) -> None:
    """The library stores a key with ESC (the command line would refuse to
    create it); `cancel`, `retry`, `check` and `graph` name it as `state` does."""
    key = "a\x1bb"
    with open_store(f"json:{store}") as s:
        Ledger(s).admit("lib", key, 1, None, datetime.now(UTC))
    res = run_sane(store, "cancel", key)  # into a pipe: the key's exact bytes
    assert (res.returncode, res.stdout) == (0, f"cancelled {key}\n"), res.stderr
    res = run_sane(store, "retry", key)
    assert (res.returncode, res.stdout) == (0, f"retried {key}\n"), res.stderr
    res = run_sane(store, "check", key, "--owner", "w", "--fence", "0")
    assert res.returncode == 6, res.stderr  # not claimed: found, not refused
    res = run_sane(store, "graph", key)
    assert res.returncode == 0 and "a\\x1bb" in res.stdout, res.stderr
