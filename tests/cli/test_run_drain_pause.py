"""`ledger pause` stops a `run --next --drain` worker as it stops a single
`run --next`: the task in hand finishes, then exit 7 with the pause's line
(docs/reference.md `run --drain`); exit 1 still when one of its commands
failed, the pause's line on stderr all the same. Fresh processes, on every
store a second process can see; waits are for states, never times.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion
PAUSED = "ledger: claiming is paused ("


def _status(url: str, key: str) -> object:
    res = run_ledger(url, "state", key, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["Status"]


def _wait_status(url: str, key: str, status: str) -> None:
    deadline = time.monotonic() + EXIT_TIMEOUT
    while _status(url, key) != status:
        assert time.monotonic() < deadline, f"{key} never became {status}"
        time.sleep(0.02)


@pytest.mark.parametrize(("exit_status", "want"), [(0, 7), (3, 1)], ids=["ok", "failed"])
def test_a_pause_stops_a_drain_after_its_task_with_the_pause_line(
    url: str, tmp_path: Path, exit_status: int, want: int
) -> None:
    for key in ("t1", "t2", "t3"):
        assert run_ledger(url, "admit", key).returncode == 0
    gate = tmp_path / "go"
    script = f"while [ ! -e {gate} ]; do sleep 0.02; done; exit {exit_status}"
    drain = subprocess.Popen(
        [*ledger_cmd(), "--store", url, "run", "--next", "--drain", "--owner", "w1",
         "--lease", "1m", "--", "sh", "-c", script],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        _wait_status(url, "t1", "claimed")  # the drain holds its first task
        assert run_ledger(url, "pause", "--reason", "freeze").returncode == 0
        gate.touch()
        _, err = drain.communicate(timeout=EXIT_TIMEOUT)
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.communicate()
    assert drain.returncode == want, err
    assert PAUSED in err and "freeze" in err, err
    assert _status(url, "t1") == ("completed" if exit_status == 0 else "failed")
    assert _status(url, "t2") == "pending" and _status(url, "t3") == "pending"


def test_a_drain_on_a_paused_store_says_so(url: str) -> None:
    """No task run: the pause's line, not "nothing is ready"."""
    assert run_ledger(url, "admit", "t1").returncode == 0
    assert run_ledger(url, "pause", "--reason", "freeze").returncode == 0
    res = run_ledger(
        url, "run", "--next", "--drain", "--owner", "w1", "--lease", "1m", "--", "true"
    )
    assert res.returncode == 7, res.stderr
    assert res.stderr.startswith(PAUSED), res.stderr
