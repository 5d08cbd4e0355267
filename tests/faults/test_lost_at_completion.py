"""A lease lost while the command ends on its own (docs/design.md §7.1).

The task is rebased, or cancelled, under a running `ledger run` whose command
then ends by itself before the next renewal: the refused completion is a lost
lease like a refused renewal (exit 5, the lost-lease line saying how the
command had ended), and the run's attempt keeps its end, exit status and
output (written on its own, keyed by the attempt: the task's record is not
written). A later attempt by another worker is its own.

Fresh `ledger` processes on JSON, SQLite and PostgreSQL. The command waits
for a file the test creates once the task was taken away; the lease is long
enough that no renewal comes before the command's end (the first is a third
of it in).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli_support import ledger_ok, start_ledger, state_attempts
from tests.stores import KINDS
from tests.timing_support import HANG, wait_for_file

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX processes")

LEASE = 60.0
"""Seconds: w1's lease. Its first renewal, a third of it in, would notice the
loss first; the command ends long before, once the test lets it."""

COMMAND = "echo up > {up}; while [ ! -e {go} ]; do sleep 0.05; done; echo finished fine"
"""w1's command: says it runs, waits for the go file, then ends with exit 0."""


def _take_away(store: str, remedy: str) -> None:
    if remedy == "rebase":
        assert ledger_ok(store, "admit", "job", "--seq", "2") == "admitted\n"
    else:
        ledger_ok(store, "cancel", "job")
        if remedy == "cancel-retry":
            ledger_ok(store, "retry", "job")


def _lose_as_it_ends(store: str, tmp_path: Path, remedy: str, *run: str) -> None:
    """`ledger RUN -- COMMAND`, the task taken away (`remedy`) while the
    command waits, then let end: exit 5, the lost-lease line its last."""
    up, go = tmp_path / "up", tmp_path / "go"
    command = ("--", "sh", "-c", COMMAND.format(up=up, go=go))
    lease = ("--lease", f"{LEASE:g}s")
    w1 = start_ledger(store, *run, "--owner", "w1", *lease, *command, cwd=tmp_path)
    try:
        wait_for_file(up)
        _take_away(store, remedy)
        go.touch()
        assert w1.wait(timeout=HANG) == 5
        assert w1.stderr is not None
        said = w1.stderr.read().splitlines()
    finally:
        if w1.poll() is None:
            w1.kill()
            w1.wait()
    assert said[-1].startswith("ledger: lost the lease on job: "), said
    assert said[-1].endswith("; the command had ended with exit status 0"), said


@pytest.mark.parametrize("remedy", ["rebase", "cancel"])
@pytest.mark.parametrize("kind", ["json", "sqlite", "postgresql"])
def test_a_command_that_ends_after_its_task_was_taken_keeps_its_outcome(
    kind: str, remedy: str, tmp_path: Path
) -> None:
    with KINDS[kind].place(tmp_path) as location:
        store = KINDS[kind].url(location)
        ledger_ok(store, "admit", "job")
        _lose_as_it_ends(store, tmp_path, remedy, "run", "job")

        (first,) = state_attempts(store)
        assert first["ended"] is not None and first["exit"] == 0, first
        assert first["signal"] is None and first["abandoned"] is False, first
        assert ledger_ok(store, "output", "job") == "finished fine\n"
        shown = ledger_ok(store, "state", "job")
        assert "exit 0" in shown and "abandoned" not in shown, shown

        # Another worker's run of the task is an attempt of its own.
        if remedy == "cancel":
            ledger_ok(store, "retry", "job")
        ledger_ok(store, "run", "job", "--owner", "w2", "--lease", "30s", "--", "echo", "again")
        one, two = state_attempts(store)
        assert (one["n"], one["owner"], one["exit"], one["ended"]) == (
            1, "w1", 0, first["ended"],
        )  # fmt: skip
        assert (two["n"], two["owner"], two["exit"]) == (2, "w2", 0), two
        assert ledger_ok(store, "output", "job", "--attempt", "1") == "finished fine\n"
        assert ledger_ok(store, "output", "job") == "again\n"
        assert json.loads(ledger_ok(store, "--json", "state", "job"))["Status"] == "completed"


def test_a_drain_whose_task_was_taken_as_it_ended_exits_5(tmp_path: Path) -> None:
    """`run --drain`: a lease lost at the completion stops the drain as a lost
    lease does (exit 5 at once, nothing more claimed), the attempt ended."""
    store = str(tmp_path / "s")
    ledger_ok(store, "admit", "job")
    ledger_ok(store, "admit", "other")  # ready after job (oldest first, design.md §4.3)
    _lose_as_it_ends(store, tmp_path, "cancel-retry", "run", "--next", "--drain")
    (first,) = state_attempts(store)
    assert (first["exit"], first["abandoned"]) == (0, False), first
    assert json.loads(ledger_ok(store, "--json", "state", "job"))["Status"] == "pending"
    other = json.loads(ledger_ok(store, "--json", "state", "other"))
    assert (other["Status"], other.get("attempts")) == ("pending", []), other
