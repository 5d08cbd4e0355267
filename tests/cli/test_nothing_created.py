"""Only a write creates a store (docs/reference.md): a command that finds
nothing to write to in an SQLite file that is not there answers as on an
empty store (the JSON store's answer) and leaves no file behind. Each case
runs the installed `ledger` as a fresh process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.cli_support import run_ledger

if TYPE_CHECKING:
    from pathlib import Path

COMMANDS = (
    ("claim", "x", "--owner", "w", "--lease", "1m"),
    ("renew", "x", "--owner", "w", "--fence", "1", "--lease", "1m"),
    ("release", "x", "--owner", "w", "--fence", "1"),
    ("complete", "x", "--owner", "w", "--fence", "1"),
    ("retry", "x"),
    ("cancel", "x"),
    ("takeover", "x", "--owner", "w", "--lease", "1m"),
    ("resume",),
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_no_sqlite_file_is_created_by_a_command_that_writes_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    json_store, db = tmp_path / "j", tmp_path / "typo.db"
    want = run_ledger(json_store, *command)
    got = run_ledger(f"sqlite:{db}", *command)
    assert (got.returncode, got.stdout, got.stderr) == (want.returncode, want.stdout, want.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], (got.stderr, list(tmp_path.iterdir()))


def test_a_write_still_creates_the_file(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    r = run_ledger(f"sqlite:{db}", "admit", "a")
    assert r.returncode == 0, r.stderr
    r = run_ledger(f"sqlite:{db}", "claim", "a", "--owner", "w", "--lease", "1m")
    assert (r.returncode, r.stdout) == (0, "1\n"), r.stderr
    assert db.exists()
