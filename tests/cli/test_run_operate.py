"""`ledger run` with the operator's tools, as real processes on the JSON store:
`cancel` stops a running command (exit 5), and `--retries/--backoff`
(docs/design.md §6.3, §6.7). Waits are derived from the lease and the backoff; the
tests wait for states (a file, an exit), never for a time.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ledger_cli.cli.commands.run import STOP_GRACE
from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.timing_support import alive, wait_for_file

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion


def _events(store: Path, key: str) -> list[dict[str, str]]:
    res = run_ledger(store, "log", key, "--json")
    assert res.returncode == 0, res.stderr
    events: list[dict[str, str]] = json.loads(res.stdout)
    return events


def _start_run(store: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), "run", *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_cancel_stops_a_running_command_and_run_exits_5(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    assert run_ledger(store, "admit", "after", "--needs", "job").returncode == 0
    pidfile = tmp_path / "pid"
    run = _start_run(
        store, "job", "--owner", "w", "--lease", "1s",
        "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60",
    )  # fmt: skip
    child = int(wait_for_file(pidfile, 30))
    cancel = run_ledger(store, "cancel", "job", "--reason", "wrong input", "--actor", "ops")
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout.splitlines() == ["cancelled job", "blocked after"]
    # The next renewal (every third of the lease) is refused: the group is stopped.
    _, err = run.communicate(timeout=EXIT_TIMEOUT)
    assert run.returncode == 5, err
    # The lost-lease wording (exit 5, code fenced), with the refusal's reason.
    assert err.splitlines()[-1] == (
        "ledger: lost the lease on job: record is not claimed (job is failed); "
        "the command was stopped"
    )
    assert not alive(child)
    state = json.loads(run_ledger(store, "state", "job", "--json").stdout)
    assert (state["Status"], state["Fence"], state["Owner"]) == ("failed", 2, "")
    events = _events(store, "job")
    cancelled = [e for e in events if e["event"] == "ledger.cancelled"]
    assert [(e["actor"], e["data"]) for e in cancelled] == [
        ("ops", "key job cancelled by ops (reason: wrong input)")
    ]
    assert events[-1]["event"] == "ledger.cancelled"  # run completed nothing after it


def test_a_command_ignoring_sigterm_is_killed_within_the_lease_last_proved(
    tmp_path: Path,
) -> None:
    """A refused renewal (here a takeover) stops the command: SIGTERM, then
    SIGKILL by the hard stop's deadline, not STOP_GRACE later, since the rival
    that took the task over may be running it already."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    pidfile, terms = tmp_path / "pid", tmp_path / "terms"
    lease = 1.0
    assert lease < STOP_GRACE / 2
    script = f"trap 'echo term >> {terms}' TERM; echo $$ > {pidfile}; while :; do sleep 0.05; done"
    run = _start_run(store, "job", "--owner", "w", "--lease", f"{lease}s", "--", "sh", "-c", script)
    child = int(wait_for_file(pidfile, 30))
    took = run_ledger(
        store, "takeover", "job", "--owner", "rival", "--lease", "1m",
        LEDGER_NOW="2099-01-01T00:00:00Z",
    )  # fmt: skip
    assert took.returncode == 0, took.stderr
    taken = time.monotonic()
    _, err = run.communicate(timeout=EXIT_TIMEOUT)
    stopped = time.monotonic() - taken
    assert run.returncode == 5, err
    assert "lost the lease on job" in err.splitlines()[-1]
    assert not alive(child)
    assert terms.read_text().split() == ["term"]  # it was asked first, and ignored it
    # The lease last proved ends at most `lease` after the takeover; STOP_GRACE
    # after the refusal would be STOP_GRACE at least. The bound lies between.
    assert stopped < (lease + STOP_GRACE) / 2, stopped


def test_retries_rerun_under_one_renewed_lease(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job", "--task", '{"n": 1}').returncode == 0
    lease, backoff = 1.0, 0.6
    # Waits: 0.6 s then 1.2 s; together longer than the lease, so only renewals
    # during the waits keep it. The third attempt checks that with a rival claim.
    rival = tmp_path / "rival"
    attempts = tmp_path / "attempts"
    rival_claim = shlex.join(
        [*ledger_cmd(), "--store", str(store), "claim", "job", "--owner", "rival", "--lease", "1m"]
    )
    script = (
        f'echo "$LEDGER_ATTEMPT $LEDGER_FENCE" >> {attempts}; '
        f'if [ "$LEDGER_ATTEMPT" -lt 3 ]; then exit 7; fi; '
        f"{rival_claim} >/dev/null 2>&1; echo $? > {rival}; exit 0"
    )
    run = _start_run(
        store, "job", "--owner", "w", "--lease", f"{lease}s",
        "--retries", "3", "--backoff", f"{backoff}s", "--json", "--", "sh", "-c", script,
    )  # fmt: skip
    out, err = run.communicate(timeout=EXIT_TIMEOUT)
    assert run.returncode == 0, err
    assert attempts.read_text().splitlines() == ["1 1", "2 1", "3 1"]
    assert rival.read_text().strip() == "4"  # the lease was live after 1.8 s of waits
    doc = json.loads(out.splitlines()[-1])
    assert (doc["status"], doc["exit"], doc["attempts"], doc["fence"]) == ("completed", 0, 3, 1)
    events = _events(store, "job")
    failed = [e for e in events if e["event"] == "ledger.attempt_failed"]
    assert [e["data"] for e in failed] == [
        "key job attempt 1 of 4 failed with exit status 7",
        "key job attempt 2 of 4 failed with exit status 7",
    ]
    names = [e["event"] for e in events]
    assert names.index("ledger.renewed") < len(names) - 1
    assert names[-1] == "ledger.completed"
    assert json.loads(run_ledger(store, "state", "job", "--json").stdout)["Status"] == "completed"


def test_the_last_failed_attempt_fails_the_task(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    res = run_ledger(
        store, "run", "job", "--owner", "w", "--lease", "1m", "--retries", "2",
        "--backoff", "0", "--json", "--", sys.executable, "-c", "import sys; sys.exit(3)",
    )  # fmt: skip
    assert res.returncode == 3, res.stderr
    assert json.loads(res.stdout)["attempts"] == 3
    events = _events(store, "job")
    assert [e["event"] for e in events].count("ledger.attempt_failed") == 2
    data = events[-1]["data"]  # docs/design.md §7.3: the exit, the duration, the attempt
    assert data.startswith("key job completed as failed by w (exit 3 after ")
    assert data.endswith("s, attempt 3)")


def test_a_lease_lost_during_a_backoff_wait_stops_everything(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    marker = tmp_path / "ran"
    run = _start_run(
        store, "job", "--owner", "w", "--lease", "1s", "--retries", "5", "--backoff", "1h",
        "--", "sh", "-c", f"echo $LEDGER_ATTEMPT >> {marker}; exit 1",
    )  # fmt: skip
    assert wait_for_file(marker, 30) == "1"
    while not any(e["event"] == "ledger.attempt_failed" for e in _events(store, "job")):
        time.sleep(0.05)
    assert run_ledger(store, "cancel", "job").returncode == 0
    _, err = run.communicate(timeout=EXIT_TIMEOUT)  # an hour's wait cut short
    assert run.returncode == 5, err
    assert marker.read_text().split() == ["1"]


def test_bad_retries_are_usage_errors_and_claim_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    for args in (["--retries", "-1"], ["--retries", "x"], ["--backoff", "soon"]):
        res = run_ledger(store, "run", "job", "--owner", "w", "--lease", "1m", *args, "--", "true")
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1
    assert json.loads(run_ledger(store, "state", "job", "--json").stdout)["Status"] == "pending"


def test_a_signal_during_a_backoff_wait_releases_the_task(tmp_path: Path) -> None:
    import signal

    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    run = _start_run(
        store, "job", "--owner", "w", "--lease", "1m", "--retries", "5", "--backoff", "1h",
        "--", "sh", "-c", "exit 1",
    )  # fmt: skip
    while not any(e["event"] == "ledger.attempt_failed" for e in _events(store, "job")):
        assert run.poll() is None
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=EXIT_TIMEOUT) == 128 + signal.SIGTERM
    state = json.loads(run_ledger(store, "state", "job", "--json").stdout)
    assert (state["Status"], state["Owner"]) == ("pending", "")
