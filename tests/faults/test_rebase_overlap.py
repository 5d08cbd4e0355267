"""No two copies of one task run at once when it is rebased or cancelled and
retried under a running `ledger run` (docs/design.md §2.2, §6.3, §8.1).

Fresh `ledger` processes on each durable store. w1 runs the task under a
short lease with a command that ignores SIGTERM and writes a heartbeat, so it
runs until the runner's hard stop (SIGKILL before the lease it can prove
ends). The task is rebased (or cancelled and retried) while it runs; a second
worker's `run --next --wait` must not start it before the dispossessed
command is gone: its first timestamp comes after w1's last heartbeat, and not
before the old lease's end, which the rebase keeps as the task's not-before.
Every wait is for a state, bounded by the lease or by a hang.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from tests.cli_support import run_ledger, start_ledger
from tests.stores import KINDS
from tests.timing_support import HANG, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")

LEASE = 6.0
"""Seconds: w1's lease; its renewer notices the loss a third of it in, and its
command, deaf to SIGTERM, is killed just before the lease ends: time enough for
a rival to start beside it if the task were claimable at once."""

W1 = "trap '' TERM; while :; do date +%s.%N >> {}; sleep 0.05; done"
"""w1's command: a heartbeat into the file named, until SIGKILL."""


def _state(store: str) -> dict[str, object]:
    res = run_ledger(store, "--json", "state", "job")
    assert res.returncode == 0, res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def _times(path: Path) -> list[float]:
    return [float(t) for t in path.read_text().split()]


def _seconds(text: object) -> float:
    return Instant.parse(str(text)).unix_ns / 1e9


@pytest.mark.parametrize("remedy", ["rebase", "cancel-retry"])
@pytest.mark.parametrize("kind", ["json", "sqlite", "postgresql"])
def test_a_dispossessed_runner_never_overlaps_the_next(
    kind: str, remedy: str, tmp_path: Path
) -> None:
    spec = KINDS[kind]
    with spec.place(tmp_path) as location:
        store = spec.url(location)
        assert run_ledger(store, "admit", "job", "--task", '{"v":1}').returncode == 0
        beats, started = tmp_path / "w1.beats", tmp_path / "w2.start"
        command = ("--", "sh", "-c", W1.format(beats))
        w1 = start_ledger(
            store, "run", "job", "--owner", "w1", "--lease", f"{LEASE:g}s", *command, cwd=tmp_path
        )
        procs = [w1]
        try:
            wait_until(beats.exists, "w1's command to start")
            # w2 polls from now on (its start-up is not part of the window it could
            # overlap in): nothing is ready while w1 holds the task.
            nxt = ("run", "--next", "--wait", f"{HANG:g}s", "--owner", "w2", "--lease", "30s")
            w2 = start_ledger(
                store, *nxt, "--", "sh", "-c", f"date +%s.%N > {started}", cwd=tmp_path
            )
            procs.append(w2)
            held = _state(store)
            assert held["Status"] == "claimed" and held["Owner"] == "w1", held
            if remedy == "rebase":
                res = run_ledger(store, "admit", "job", "--seq", "2", "--task", '{"v":2}')
                assert res.stdout == "admitted\n", res.stderr
            else:
                assert run_ledger(store, "cancel", "job").returncode == 0
                assert run_ledger(store, "retry", "job").returncode == 0
            after = _state(store)
            assert after["Status"] == "pending", after
            # Not due before the lease w1 held (renewed since, perhaps: later then).
            assert _seconds(after["NotBefore"]) >= _seconds(held["LeaseUntil"])
            assert w2.wait(timeout=HANG) == 0, w2.stderr and w2.stderr.read()
            assert w1.wait(timeout=HANG) == 5
            assert w1.stderr is not None
            assert "the command was stopped" in w1.stderr.read()
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        (start,) = _times(started)
        assert start > max(_times(beats)), "w2 started while w1's command still ran"
        assert start >= _seconds(after["NotBefore"])


def test_a_runner_rebased_between_attempts_does_not_say_it_stopped_the_command(
    tmp_path: Path,
) -> None:
    """The lease is lost while `run` waits to try again: the command had ended
    on its own, and exit 5 says so rather than "the command was stopped"."""
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "job").returncode == 0
    again = ("--retries", "1", "--backoff", f"{HANG:g}s")
    run = ("run", "job", "--owner", "w1", "--lease", f"{LEASE:g}s", *again)
    w1 = start_ledger(store, *run, "--", "sh", "-c", "exit 3", cwd=tmp_path)
    try:

        def first_ended() -> bool:
            attempts = _state(str(store)).get("attempts")
            return isinstance(attempts, list) and attempts[-1]["ended"] is not None

        wait_until(first_ended, "the first attempt to end")
        res = run_ledger(store, "admit", "job", "--seq", "2")
        assert res.stdout == "admitted\n", res.stderr
        assert w1.wait(timeout=HANG) == 5
        assert w1.stderr is not None
        said = w1.stderr.read()
        assert "the command had ended with exit status 3" in said, said
        assert "stopped" not in said, said
    finally:
        if w1.poll() is None:
            w1.kill()
            w1.wait()


def test_a_command_that_exits_when_asked_to_stop_is_said_to_have_ended(tmp_path: Path) -> None:
    """Rebased while its command runs: the runner asks it to stop (SIGTERM);
    a command that ignores that and exits by itself before the SIGKILL is
    reported as ended with its status, not as stopped."""
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "job").returncode == 0
    began = tmp_path / "began"
    body = f"trap '' TERM; touch {began}; sleep {LEASE / 2:g}"
    run = ("run", "job", "--owner", "w1", "--lease", f"{LEASE:g}s")
    w1 = start_ledger(store, *run, "--", "sh", "-c", body, cwd=tmp_path)
    try:
        wait_until(began.exists, "the command to start")
        res = run_ledger(store, "admit", "job", "--seq", "2")
        assert res.stdout == "admitted\n", res.stderr
        assert w1.wait(timeout=HANG) == 5
        assert w1.stderr is not None
        said = w1.stderr.read()
        assert "the command had ended with exit status 0" in said, said
    finally:
        if w1.poll() is None:
            w1.kill()
            w1.wait()
