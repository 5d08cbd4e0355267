"""An attempt whose task is taken from its live runner (a rebase, a cancel)
is not abandoned while that runner may still be stopping its command and
recording the end (docs/design.md §7.1): it runs until the end of the lease
taken, plus the runner's grace (engine/attempts.py `is_live`). Before, the
cleared lease made it "abandoned" at once: `state` said so while the command
still ran, and `output --follow` quit with exit 5, losing the rest.

Fresh `ledger` processes on a JSON store; every wait is for a state (output
recorded, the follower's end), never for a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import (
    ledger_cmd,
    run_ledger,
    start_ledger,
    state_attempts,
    subprocess_env,
)
from tests.timing_support import HANG, wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups, SIGKILL")

LEASE = "6s"
TICKS = "trap '' TERM; i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"
"""A command that ignores SIGTERM and never ends by itself: its runner stops it
with SIGKILL once it learns its lease was taken, however long the take took
to land on a loaded machine."""


@pytest.mark.parametrize(
    "take", [("admit", "job", "--seq", "2"), ("cancel", "job")], ids=["rebase", "cancel"]
)
def test_follow_outlasts_a_taken_lease_to_the_recorded_end(
    tmp_path: Path, take: tuple[str, ...]
) -> None:
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "job").returncode == 0
    run = ["run", "job", "--owner", "w1", "--lease", LEASE, "--", "sh", "-c", TICKS]
    runner = start_ledger(store, *run, cwd=tmp_path, session=True)
    follower: subprocess.Popen[bytes] | None = None
    try:
        wait_until(
            lambda: (state_attempts(store) or [{}])[-1].get("output_bytes"), "output recorded"
        )
        follower = subprocess.Popen(
            [*ledger_cmd(), "--store", str(store), "output", "job", "--follow"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
        )
        assert run_ledger(store, *take).returncode == 0
        (att,) = state_attempts(store)
        if att["ended"] is None:  # the runner only learns of it at its next renewal
            assert att["abandoned"] is False
        out, err = follower.communicate(timeout=HANG)
        _, run_err = runner.communicate(timeout=HANG)
    finally:
        for proc in (runner, follower):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert runner.returncode == 5, run_err  # the lease was lost
    assert follower.returncode == 0, err  # the end came: not abandoned (exit 5)
    assert b"abandoned" not in err and b"killed by SIGKILL" in err, err
    (att,) = state_attempts(store)
    assert att["ended"] is not None and att["abandoned"] is False
    kept = run_ledger(store, "output", "job").stdout
    assert out.decode() == kept  # everything the command wrote, to its end
