"""Only a write creates a store (docs/reference.md): a command that finds
nothing to write to in an SQLite file that is not there answers as on an
empty store (the JSON store's answer) and leaves no file behind. Each case
runs the installed `ledger` as a fresh process."""

from __future__ import annotations

import json
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
    ("run", "x", "--owner", "w", "--lease", "1m", "--", "true"),
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


WAITING = (
    ("claim", "--next", "--owner", "w", "--lease", "1m", "--wait"),
    ("run", "--next", "--owner", "w", "--lease", "1m", "--wait"),
    ("run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--wait"),
)
"""Each followed by the wait (and `run`'s command)."""


@pytest.mark.parametrize("command", WAITING, ids=lambda c: "-".join(c[:3]))
def test_a_wait_on_a_missing_sqlite_file_creates_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    db = tmp_path / "typo.db"
    r = run_ledger(f"sqlite:{db}", *command, "0.3s", *_command_of(command))
    assert r.returncode == 7, r.stderr
    assert r.stderr == "ledger: nothing is ready to claim\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", WAITING[:2], ids=lambda c: c[0])
def test_a_wait_takes_the_store_a_write_creates(tmp_path: Path, command: tuple[str, ...]) -> None:
    import subprocess

    from tests.cli_support import ledger_cmd, subprocess_env

    url = f"sqlite:{tmp_path / 'later.db'}"
    waiter = subprocess.Popen(
        [*ledger_cmd(), "--store", url, *command, "120s", *_command_of(command)],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        r = run_ledger(url, "admit", "job")  # the waiter may be looking, or not yet
        assert r.returncode == 0, r.stderr
        _out, err = waiter.communicate(timeout=120)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, err
    state = json.loads(run_ledger(url, "--json", "state", "job").stdout)
    assert state["Status"] in ("claimed", "completed"), state


def _command_of(command: tuple[str, ...]) -> tuple[str, ...]:
    return ("--", "true") if command[0] == "run" else ()


def test_a_drain_waits_for_the_store_a_write_creates(tmp_path: Path) -> None:
    """`run --next --drain --wait` on a missing SQLite file runs the task an
    admit later puts in it (then SIGTERM between tasks: exit 143)."""
    import signal
    import subprocess

    from tests.cli_support import ledger_cmd, subprocess_env
    from tests.timing_support import wait_until

    url = f"sqlite:{tmp_path / 'later.db'}"
    drain = ("run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--wait", "120s")
    waiter = subprocess.Popen(
        [*ledger_cmd(), "--store", url, *drain, "--", "true"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run_ledger(url, "admit", "job").returncode == 0

        def done() -> bool:
            state = run_ledger(url, "--json", "state", "job").stdout
            return bool(state) and json.loads(state)["Status"] == "completed"

        wait_until(done, "the drain to complete the job")
        waiter.send_signal(signal.SIGTERM)
        _out, err = waiter.communicate(timeout=120)
    finally:
        waiter.kill()
    assert waiter.returncode == 143, err
