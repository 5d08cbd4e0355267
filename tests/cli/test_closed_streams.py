"""Closed and failing standard streams (docs/design.md §4.5): reading `-` from
a closed stdin is bad input (exit 2); output stdout does not take is one line
on stderr and exit 74, saying when the command's write was committed; a
closed or full stderr never changes the exit code. Never 70, never a traceback.

Fresh processes, their streams set up by `sh` (`<&-`, `>&-`, `>/dev/full`:
/dev/full is only written to, never replaced), with Python's stdout
buffered and unbuffered (PYTHONUNBUFFERED), which fail at different moments.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion
FULL = "ledger: could not write the output to stdout: No space left on device"
COMMITTED = " (the command's write was committed)"

needs_dev_full = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")


@pytest.fixture(params=["buffered", "unbuffered"])
def unbuffered(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "unbuffered")


def ledger_with(
    store: Path, redirections: str, *args: str, unbuffered: bool = False
) -> subprocess.CompletedProcess[str]:
    """`ledger --store STORE ARGS REDIRECTIONS`, run by sh."""
    env = subprocess_env()
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    script = f'exec "$@" {redirections}'
    return subprocess.run(
        ["sh", "-c", script, "sh", *ledger_cmd(), "--store", str(store), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=EXIT_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["admit", "t", "--task-file", "-"], "--task-file"),
        (["admit", "--batch", "-"], "--batch"),
        (["restore", "-"], "snapshot"),
    ],
)
def test_reading_a_closed_stdin_is_bad_input(tmp_path: Path, args: list[str], what: str) -> None:
    store = tmp_path / "s"
    res = ledger_with(store, "<&-", *args)
    assert res.returncode == 2
    assert res.stderr == f"ledger: cannot read {what} (standard input): it is closed\n"
    assert not store.exists()  # nothing written, not even a new store


def test_a_closed_stdout_is_exit_74(tmp_path: Path, unbuffered: bool) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    for args in (["list"], ["list", "--jsonl"], ["--json", "state", "a"], ["snapshot"]):
        res = ledger_with(store, ">&-", *args, unbuffered=unbuffered)
        assert (res.returncode, res.stderr) == (
            74,
            "ledger: could not write the output to stdout: it is closed\n",
        ), args


@needs_dev_full
def test_a_full_stdout_after_a_write_says_it_was_committed(
    tmp_path: Path, unbuffered: bool
) -> None:
    store = tmp_path / "s"
    res = ledger_with(store, ">/dev/full", "admit", "q", unbuffered=unbuffered)
    assert (res.returncode, res.stderr) == (74, FULL + COMMITTED + "\n")
    res = ledger_with(
        store, ">/dev/full", "claim", "q", "--owner", "w", "--lease", "1m", unbuffered=unbuffered
    )
    assert (res.returncode, res.stderr) == (74, FULL + COMMITTED + "\n")
    rec = json.loads(run_ledger(store, "--json", "state", "q").stdout)
    assert (rec["Status"], rec["Owner"], rec["Fence"]) == ("claimed", "w", 1)
    res = ledger_with(store, ">/dev/full", "list", "--jsonl", unbuffered=unbuffered)
    assert (res.returncode, res.stderr) == (74, FULL + "\n")  # a read: nothing to commit


@needs_dev_full
def test_a_failed_command_keeps_its_code_when_stdout_is_full(
    tmp_path: Path, unbuffered: bool
) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    res = ledger_with(store, ">/dev/full", "--json", "state", "nope", unbuffered=unbuffered)
    assert res.returncode == 3
    assert res.stderr == f"ledger: key has no record: nope\n{FULL}\n"


@needs_dev_full
@pytest.mark.parametrize("stderr", ["2>&-", "2>/dev/full"])
def test_a_closed_or_full_stderr_keeps_the_exit_code(
    tmp_path: Path, stderr: str, unbuffered: bool
) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "a").returncode == 0
    res = ledger_with(store, stderr, "state", "nope", unbuffered=unbuffered)
    assert res.returncode == 3
    res = ledger_with(store, stderr, "--no-such-option", unbuffered=unbuffered)
    assert res.returncode == 2
    res = ledger_with(store, f"{stderr} >/dev/full", "admit", "b", unbuffered=unbuffered)
    assert res.returncode == 74


def test_every_stream_closed_still_writes_no_store_file_on_them(tmp_path: Path) -> None:
    """Descriptors 0-2 closed: the store's files take other numbers, so the
    output fails (74) and the record is intact."""
    store = tmp_path / "s"
    res = ledger_with(store, "<&- >&- 2>&-", "admit", "a", "--task", '{"n": 1}')
    assert res.returncode == 74
    rec = json.loads(run_ledger(store, "--json", "state", "a").stdout)
    assert rec["Task"] == {"n": 1}
    assert run_ledger(store, "doctor").returncode == 0


@needs_dev_full
def test_pause_limit_and_restore_say_their_write_was_committed(tmp_path: Path) -> None:
    source = tmp_path / "a"
    assert run_ledger(source, "admit", "x").returncode == 0
    snapshot = tmp_path / "snap.json"
    assert run_ledger(source, "snapshot", "-o", str(snapshot)).returncode == 0
    store = tmp_path / "b"
    for args in (["restore", str(snapshot)], ["pause"], ["limit", "q", "2"], ["resume"]):
        res = ledger_with(store, ">/dev/full", *args)
        assert (res.returncode, res.stderr) == (74, FULL + COMMITTED + "\n"), args
    res = ledger_with(store, ">/dev/full", "resume")  # not paused: nothing written
    assert (res.returncode, res.stderr) == (74, FULL + "\n")
    assert json.loads(run_ledger(store, "--json", "state", "x").stdout)["Key"] == "x"
