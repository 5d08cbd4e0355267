"""A signal that reaches `ledger run` just after its claim landed, before its
command started (cli/commands/run/signals.py): the task is released and the
command does not run to its end. Before, such a signal was either swallowed
(the command ran to its end, then the task was released: the work thrown
away) or killed `run` with the task left claimed for its whole lease.

Fresh `ledger` processes. The signal is sent the moment the history shows
the claim (a state, polled), which lands in that window often but not
always; the outcome checked holds whenever the signal lands."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.cli_support import run_ledger, start_ledger
from tests.timing_support import HANGUP

LEASE = "60s"
TRIES = 4
JOB = "echo start >> log; sleep 30; echo end >> log"


def _claimed(history: Path) -> bool:
    try:
        return "claimed by w1" in history.read_text()
    except FileNotFoundError:
        return False


@pytest.mark.parametrize(
    "sig", [pytest.param(signal.SIGTERM, id="TERM"), pytest.param(signal.SIGINT, id="INT"), HANGUP]
)
def test_a_signal_right_after_the_claim_releases_the_task(tmp_path: Path, sig: int) -> None:
    for n in range(TRIES):
        here = tmp_path / str(n)
        here.mkdir()
        store = here / "s"
        assert run_ledger(store, "admit", "job").returncode == 0
        args = ["run", "--next", "--owner", "w1", "--lease", LEASE, "--", "sh", "-c", JOB]
        runner = start_ledger(store, *args, cwd=here, session=True)  # `kill` reaches it alone
        try:
            deadline = time.monotonic() + 60
            while not _claimed(store / "history.jsonl"):
                assert runner.poll() is None and time.monotonic() < deadline
                time.sleep(0.0005)
            runner.send_signal(sig)
            _, err = runner.communicate(timeout=60)  # within the command's 5 s grace
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait()
        assert runner.returncode == 128 + sig, (n, runner.returncode, err)
        record = json.loads(run_ledger(store, "--json", "state", "job").stdout)
        assert record["Status"] == "pending", (n, record)  # released, not left claimed
        log = here / "log"
        assert "end" not in (log.read_text() if log.exists() else ""), n  # not run to its end
