"""`ledger run --next --drain`: one long-lived worker claims, runs and
completes task after task over one store connection, until nothing is ready.
Through the CLI, as real processes, on every store a second process can see
(the memory store lives in one process). The multi-process DAG drain is in
tests/test_ready_index.py. Waits are for states (a file, an exit), never times.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.stores import KINDS
from tests.timing_support import alive, wait_for_file

EXIT_TIMEOUT = 60.0  # a bound for a hung test, never a timing assertion
SHARED = sorted(k for k in KINDS if k != "memory")


@pytest.fixture(params=SHARED)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = KINDS[str(request.param)]
    with kind.place(tmp_path) as location:
        yield kind.url(location)


def _events(url: str, key: str) -> list[str]:
    res = run_ledger(url, "log", key, "--json")
    assert res.returncode == 0, res.stderr
    return [e["event"] for e in json.loads(res.stdout)]


def _state(url: str, key: str) -> dict[str, object]:
    res = run_ledger(url, "state", key, "--json")
    assert res.returncode == 0, res.stderr
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def _start_drain(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ledger_cmd(), "--store", url, "run", "--next", "--drain", *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_drain_runs_every_ready_task_in_order_then_exits(url: str, tmp_path: Path) -> None:
    """Exit 1 when one command failed, every other task completed, each task
    with its own history; a second drain finds nothing (exit 7)."""
    for key in ("a", "b", "c"):
        assert run_ledger(url, "admit", key).returncode == 0
    assert run_ledger(url, "admit", "d", "--needs", "a").returncode == 0
    log = tmp_path / "ran"
    res = run_ledger(
        url, "--json", "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--",
        "sh", "-c", f'echo $LEDGER_KEY >> {log}; [ "$LEDGER_KEY" != b ]',
    )  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert log.read_text().split() == ["a", "b", "c", "d"]  # Ready order; d once a completed
    docs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(d["key"], d["status"]) for d in docs] == [
        ("a", "completed"),
        ("b", "failed"),
        ("c", "completed"),
        ("d", "completed"),
    ]
    for key in ("a", "b", "c", "d"):
        assert _events(url, key) == ["ledger.admitted", "ledger.claimed", "ledger.completed"]
    again = run_ledger(
        url, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true"
    )
    assert again.returncode == 7 and again.stderr == "ledger: nothing is ready to claim\n"


def test_drain_exits_0_when_every_task_completed(url: str) -> None:
    for key in ("a", "b"):
        assert run_ledger(url, "admit", key).returncode == 0
    res = run_ledger(url, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", "true")
    assert res.returncode == 0, res.stderr
    assert {_state(url, k)["Status"] for k in ("a", "b")} == {"completed"}


def test_drain_with_a_key_is_a_usage_error_and_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    for args in (["a"], []):  # with a KEY; without --next
        res = run_ledger(
            store, "run", *args, "--drain", "--owner", "w", "--lease", "1m", "--", "true"
        )
        assert res.returncode == 2
        assert len(res.stderr.splitlines()) == 1 and "--drain goes with --next" in res.stderr
    assert _state(str(store), "a")["Status"] == "pending"
    assert _events(str(store), "a") == ["ledger.admitted"]


def test_drain_retries_apply_per_task(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    res = run_ledger(
        store, "--json", "run", "--next", "--drain", "--owner", "w", "--lease", "1m",
        "--retries", "1", "--backoff", "10ms", "--", "sh", "-c", '[ "$LEDGER_ATTEMPT" = 2 ]',
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    docs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(d["key"], d["status"], d["attempts"]) for d in docs] == [
        ("a", "completed", 2),
        ("b", "completed", 2),
    ]
    for key in ("a", "b"):
        assert _events(str(store), key) == [
            "ledger.admitted",
            "ledger.claimed",
            "ledger.attempt_failed",
            "ledger.completed",
        ]


def test_drain_stops_at_once_when_a_lease_is_lost(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    pidfile = tmp_path / "pid"
    run = _start_drain(
        str(store), "--owner", "w", "--lease", "1s", "--",
        "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60",
    )  # fmt: skip
    child = int(wait_for_file(pidfile, 30))
    took = run_ledger(
        store,
        "takeover",
        "a",
        "--owner",
        "thief",
        "--lease",
        "1m",
        LEDGER_NOW="2099-01-01T00:00:00Z",
    )
    assert took.returncode == 0, took.stderr
    _, err = run.communicate(timeout=EXIT_TIMEOUT)
    assert run.returncode == 5, err
    assert "lost the lease on a" in err
    assert not alive(child)
    assert _state(str(store), "b")["Status"] == "pending"  # nothing more was claimed


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_drain_signal_stops_the_child_releases_and_exits(
    tmp_path: Path, sig: signal.Signals
) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    pidfile = tmp_path / "pid"
    run = _start_drain(
        str(store), "--owner", "w", "--lease", "1m", "--",
        "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60",
    )  # fmt: skip
    child = int(wait_for_file(pidfile, 30))
    run.send_signal(sig)
    assert run.wait(timeout=EXIT_TIMEOUT) == 128 + sig
    assert not alive(child)
    for key in ("a", "b"):
        state = _state(str(store), key)
        assert state["Status"] == "pending" and state["Owner"] == "", key


def test_drain_waiting_for_work_stops_on_a_signal(tmp_path: Path) -> None:
    """Between tasks, polling --wait: a signal ends the drain (nothing is held)."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    done = tmp_path / "done"
    run = _start_drain(
        str(store), "--owner", "w", "--lease", "1m", "--wait", "1h", "--",
        "sh", "-c", f"echo $LEDGER_KEY > {done}",
    )  # fmt: skip
    wait_for_file(done, 30)
    deadline = time.monotonic() + EXIT_TIMEOUT
    while _state(str(store), "a")["Status"] != "completed":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=EXIT_TIMEOUT) == 128 + signal.SIGTERM


def test_drain_stops_when_the_command_cannot_start(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for key in ("a", "b"):
        assert run_ledger(store, "admit", key).returncode == 0
    missing = str(tmp_path / "no-such-command")
    res = run_ledger(
        store, "run", "--next", "--drain", "--owner", "w", "--lease", "1m", "--", missing
    )
    assert res.returncode == 127
    assert len(res.stderr.splitlines()) == 1
    for key in ("a", "b"):
        assert _state(str(store), key)["Status"] == "pending"
