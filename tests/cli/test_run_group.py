"""An attempt of `ledger run` is over only when its command's whole process
group is (cli/commands/run/group.py): a process the command left behind that
ignores SIGTERM is killed before the attempt's end is recorded, a retry
starts or `run` exits, however the command's main process ended (by itself,
on --timeout). Before, it ran on past the task's outcome and `run`, beside
the next attempt.

Fresh `ledger` processes. The straggler (`sleep`, SIGTERM ignored) writes its
pid to a file before the command's main process ends; every wait is for a
state (a file, a process gone), never for a time."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, running, subprocess_env
from tests.timing_support import HANG, wait_for_file

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads process states from /proc"
)

STRAGGLER = (
    # A process of the command's group that ignores SIGTERM, its pid in
    # straggler.N (N: the attempt), started before the main process goes on.
    "sh -c 'trap \"\" TERM; echo $$ > straggler.$LEDGER_ATTEMPT; exec sleep 300' & "
    "while [ ! -s straggler.$LEDGER_ATTEMPT ]; do sleep 0.01; done; "
)


def _run(
    tmp_path: Path, *args: str, script: str
) -> tuple[subprocess.CompletedProcess[str], list[int]]:
    """`ledger run job ARGS -- sh -c SCRIPT` in `tmp_path`, to its end; the
    stragglers' pids (every attempt's); any still running is killed then."""
    store = tmp_path / "s"
    assert run_ledger(store, "admit", "job").returncode == 0
    try:
        res = subprocess.run(
            [*ledger_cmd(), "--store", str(store), "run", "job", "--owner", "w", *args,
             "--", "sh", "-c", script],
            cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=HANG,
            check=False,
        )  # fmt: skip
        pids = [int(wait_for_file(p)) for p in sorted(tmp_path.glob("straggler.*"))]
        return res, pids
    finally:
        for p in tmp_path.glob("straggler.*"):
            with contextlib.suppress(ValueError, ProcessLookupError):
                if running(int(p.read_text())):
                    os.kill(int(p.read_text()), signal.SIGKILL)


def test_a_command_that_ends_takes_its_group_with_it(tmp_path: Path) -> None:
    res, pids = _run(tmp_path, "--lease", "30s", script=STRAGGLER + "exit 0")
    assert res.returncode == 0, res.stderr
    assert len(pids) == 1
    assert not running(pids[0])  # SIGTERM ignored: SIGKILL after the grace, before the exit


def test_a_timeout_kills_what_ignores_its_sigterm(tmp_path: Path) -> None:
    args = ("--lease", "30s", "--timeout", "1s", "--kill-after", "1s")
    res, pids = _run(tmp_path, *args, script=STRAGGLER + "sleep 300")
    assert res.returncode == 124, res.stderr  # the main process died of the SIGTERM
    assert len(pids) == 1
    assert not running(pids[0])


def test_a_retry_starts_once_the_last_attempt_s_group_is_gone(tmp_path: Path) -> None:
    # Attempt 2 notes whether attempt 1's straggler still runs as it starts.
    check = (
        'if [ "$LEDGER_ATTEMPT" = 2 ]; then '
        "s=$(cut -d' ' -f3 /proc/$(cat straggler.1)/stat 2>/dev/null); "
        'case "$s" in ""|Z|X) ;; *) echo overlap > overlap ;; esac; fi; '
    )
    args = ("--lease", "30s", "--retries", "1", "--backoff", "10ms")
    res, pids = _run(tmp_path, *args, script=check + STRAGGLER + "exit 1")
    assert res.returncode == 1, res.stderr
    assert len(pids) == 2
    assert not (tmp_path / "overlap").exists()  # no two attempts' processes at once
    assert not any(running(pid) for pid in pids)
