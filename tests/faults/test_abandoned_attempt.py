"""A `ledger run` killed outright (SIGKILL: the OOM killer, a crash) never
records its attempt's end; once the lease it ran under is over, that attempt
is abandoned (docs/design.md §7.1), judged by every reader from the record
alone: `state` says so, and `output --follow` ends with exit 5 instead of
waiting forever, before and after another worker ran the task again. On
every durable store, with fresh `ledger` processes; every wait is for a
state, bounded by a multiple of the lease."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_support import (
    ledger_cmd,
    run_ledger,
    start_ledger,
    state_attempts,
    subprocess_env,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

LEASE = 1.0
"""Seconds: the lease the killed runner held."""
BOUND = 30 * LEASE
"""The most any one wait may take: the lease, and the start-ups of the
`ledger` processes that poll it on a loaded machine."""
ABANDONED = (
    b"ledger: attempt 1 of job was abandoned: no end was recorded and the lease it ran under"
    b" is over\n"
)


def _wait_for(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(LEASE / 10)


def _outcomes(url: str) -> list[str]:
    """The outcome column of `state`'s attempts table, oldest first."""
    res = run_ledger(url, "state", "job", timeout=BOUND)
    assert res.returncode == 0, res.stderr
    rows = res.stdout.partition("attempts")[2].splitlines()
    found = (re.search(r"(running|abandoned|exit \d+)$", row.rstrip()) for row in rows)
    return [m[1] for m in found if m is not None]


def _follow(url: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*ledger_cmd(), "--store", url, "output", "job", "--follow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )


def test_a_killed_runners_attempt_is_abandoned_once_its_lease_is_over(
    url: str, tmp_path: Path
) -> None:
    assert run_ledger(url, "admit", "job").returncode == 0
    command = ["sh", "-c", "echo hi; exec sleep 300"]
    run = ["run", "job", "--owner", "w1", "--lease", f"{LEASE:g}s", "--", *command]
    runner = start_ledger(url, *run, cwd=tmp_path, session=True)
    follower = None
    try:

        def recorded() -> bool:
            atts = state_attempts(url, timeout=BOUND)
            return bool(atts) and atts[-1]["pid"] > 0 and atts[-1]["output_bytes"] > 0

        _wait_for("the run recorded its command and its output", recorded)
        assert state_attempts(url, timeout=BOUND)[-1]["abandoned"] is False
        follower = _follow(url)
        assert follower.stdout is not None
        assert follower.stdout.readline() == b"hi\n"  # it follows the running attempt
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=BOUND)

        _wait_for(
            "the attempt was told abandoned",
            lambda: state_attempts(url, timeout=BOUND)[-1]["abandoned"],
        )
        att = state_attempts(url, timeout=BOUND)[-1]
        assert (att["n"], att["ended"], att["exit"]) == (1, None, None)
        assert _outcomes(url) == ["abandoned"]
        rest, err = follower.communicate(timeout=BOUND)  # it ended on its own
        assert (follower.returncode, rest, err) == (5, b"", ABANDONED)
        res = _follow(url)
        out, err = res.communicate(timeout=BOUND)
        assert (res.returncode, out, err) == (5, b"hi\n", ABANDONED)

        # Another worker takes the task over and runs it: attempt 1 stays abandoned.
        again = ["run", "job", "--owner", "w2", "--lease", f"{LEASE:g}s", "--", "echo", "again"]
        done = run_ledger(url, *again, timeout=BOUND)
        assert done.returncode == 0, done.stderr
        atts = state_attempts(url, timeout=BOUND)
        assert [(a["n"], a["abandoned"], a["exit"]) for a in atts] == [
            (1, True, None),
            (2, False, 0),
        ]
        assert _outcomes(url) == ["abandoned", "exit 0"]
        res = _follow(url, "--attempt", "1")
        out, err = res.communicate(timeout=BOUND)
        assert (res.returncode, out, err) == (5, b"hi\n", ABANDONED)
        res = _follow(url)
        out, err = res.communicate(timeout=BOUND)
        assert (res.returncode, out) == (0, b"again\n"), err
    finally:
        for proc in (runner, follower):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
