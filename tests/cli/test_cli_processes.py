"""The command line as real processes on the JSON store: concurrent
`claim --next`, `run` (renewals, a takeover, signals) and `demo`."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ledger_cli.engine.instant import Instant
from tests.cli_support import ledger_cmd, run_ledger, subprocess_env
from tests.timing_support import (
    HANG,
    HANGUP,
    alive,
    lease_until,
    wait_for_file,
    wait_until,
)

WORKER = r"""
import os, subprocess, sys, time
store, name, log, total = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ledger = [sys.executable, "-m", "ledger_cli", "--store", store, "--actor", name]

def note(text):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, (text + "\n").encode())
    os.close(fd)

def done():
    with open(log) as fh:
        return sum(1 for ln in fh if ln.startswith("done "))

while True:
    p = subprocess.run(ledger + ["claim", "--next", "--owner", name, "--lease", "2m"],
                       capture_output=True, text=True)
    if p.returncode == 7:
        if done() >= total:
            break
        time.sleep(0.05)
        continue
    if p.returncode != 0:
        note(f"error {name} {p.returncode} {p.stderr.strip()}")
        break
    key, fence = p.stdout.split()
    note(f"claimed {key} {name}")
    c = subprocess.run(ledger + ["complete", key, "--owner", name, "--fence", fence],
                       capture_output=True, text=True)
    if c.returncode != 0:
        note(f"error {name} complete {key} {c.returncode} {c.stderr.strip()}")
        break
    note(f"done {key} {name}")
"""


def test_four_concurrent_claimers_run_each_task_once_in_dependency_order(tmp_path: Path) -> None:
    store = tmp_path / "store"
    rng = random.Random(5)
    n = 50
    needs: dict[str, list[str]] = {}
    lines = []
    for i in range(n):
        key = f"task-{i:02d}"
        deps = sorted({f"task-{j:02d}" for j in rng.sample(range(i), min(i, rng.randint(0, 3)))})
        needs[key] = deps
        lines.append(json.dumps({"key": key, "needs": deps}))
    rng.shuffle(lines)  # admission order is not dependency order
    res = run_ledger(store, "admit", "--batch", "-", input=("\n".join(lines) + "\n").encode())
    assert res.returncode == 0, res.stderr
    log = tmp_path / "log"
    log.touch()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(store), f"w{i}", str(log), str(n)],
            env=subprocess_env(),
        )
        for i in range(4)
    ]
    for w in workers:
        assert w.wait(timeout=300) == 0
    events = log.read_text().splitlines()
    assert not [e for e in events if e.startswith("error")], events
    claimed = [e.split()[1] for e in events if e.startswith("claimed ")]
    assert sorted(claimed) == sorted(needs), "each task claimed exactly once"
    # The order of truth is the store's history (written under its lock): the workers'
    # own log lines may land late (a worker descheduled between a command and its note).
    history = json.loads(run_ledger(store, "log", "--json").stdout)
    position = {(h["event"], h["key"]): i for i, h in enumerate(history)}
    assert sum(h["event"] == "ledger.claimed" for h in history) == n
    for key, deps in needs.items():
        for dep in deps:
            done_at = position[("ledger.completed", dep)]
            assert done_at < position[("ledger.claimed", key)], f"{key} claimed before {dep}"
    assert len({e.split()[2] for e in events if e.startswith("claimed ")}) > 1
    listing = json.loads(run_ledger(store, "list", "--json").stdout)
    assert {r["Status"] for r in listing} == {"completed"} and len(listing) == n
    assert all(r["Fence"] == 1 for r in listing)


def test_run_keeps_a_short_lease_alive_and_completes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job", "--task", '{"n": 7}').returncode == 0
    out, started, finish = tmp_path / "env", tmp_path / "started", tmp_path / "finish"
    # The command runs until the test has seen enough (a state), never for a set time.
    job = (
        "import os, time\n"
        f"open({str(started)!r}, 'w').close()\n"
        f"while not os.path.exists({str(finish)!r}): time.sleep(0.01)\n"
        f"open({str(out)!r}, 'w').write(os.environ['LEDGER_KEY'] + ' ' + "
        "os.environ['LEDGER_FENCE'] + ' ' + os.environ['LEDGER_TASK'])"
    )
    run = subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), "run", "job", "--owner", "w", "--lease", "2s",
         "--", sys.executable, "-c", job],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_until(lambda: started.exists() or run.poll() is not None, "the command to start")
        assert run.poll() is None, run.stderr.read()  # type: ignore[union-attr]
        first_lease = lease_until(store, "job")
        refusals = late_refusals = 0

        def lease_kept_past_its_first_end() -> bool:
            # A rival finds the lease live, again and again, until well past the
            # first lease's end: the renewals (at least two) kept it alive.
            nonlocal refusals, late_refusals
            asked_at = Instant.now()
            rival = run_ledger(store, "claim", "job", "--owner", "rival", "--lease", "1m")
            assert rival.returncode == 4, rival.stderr
            refusals += 1
            late_refusals += asked_at > first_lease
            return late_refusals >= 2 and refusals >= 3

        wait_until(lease_kept_past_its_first_end, "rivals refused past the first lease")
    finally:
        finish.touch()
    run.wait(timeout=HANG)
    assert run.returncode == 0, run.stderr.read()  # type: ignore[union-attr]
    assert out.read_text() == 'job 1 {"n":7}'
    state = json.loads(run_ledger(store, "state", "job", "--json").stdout)
    assert state["Status"] == "completed" and state["Owner"] == "w"
    events = [e["event"] for e in json.loads(run_ledger(store, "log", "job", "--json").stdout)]
    assert events[:2] == ["ledger.admitted", "ledger.claimed"]
    # (A refusal past the first lease's end needed at least one renewal.)
    assert events.count("ledger.renewed") >= 1 and events[-1] == "ledger.completed"


def test_run_takeover_stops_the_child_and_exits_5(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    pidfile = tmp_path / "pid"
    run = subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), "run", "job", "--owner", "w", "--lease", "1s",
         "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    child = int(wait_for_file(pidfile))
    assert alive(child)
    # A rival whose clock is past the lease takes the task over.
    future = "2099-01-01T00:00:00Z"
    took = run_ledger(
        store, "takeover", "job", "--owner", "thief", "--lease", "1m", LEDGER_NOW=future
    )
    assert took.returncode == 0 and took.stdout == "2\n", took.stderr
    _, err = run.communicate(timeout=30)
    assert run.returncode == 5
    assert err.splitlines()[-1].startswith("ledger: lost the lease on job: fence token is stale")
    assert not alive(child)
    state = json.loads(run_ledger(store, "state", "job", "--json").stdout)
    assert state["Status"] == "claimed" and state["Owner"] == "thief" and state["Fence"] == 2


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, HANGUP])
def test_run_signal_stops_the_child_and_releases(tmp_path: Path, sig: signal.Signals) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    pidfile = tmp_path / "pid"
    run = subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), "run", "job", "--owner", "w", "--lease", "1m",
         "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 60"],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    child = int(wait_for_file(pidfile))
    run.send_signal(sig)
    assert run.wait(timeout=30) == 128 + sig
    assert not alive(child)
    state = json.loads(run_ledger(store, "state", "job", "--json").stdout)
    assert state["Status"] == "pending" and state["Owner"] == ""


# A program that takes SIGHUP for "reload" and SIGTERM for "stop".
RELOADS_ON_HUP = (
    'echo $$ > pid; trap "echo reloaded >> got" HUP; trap "echo stopped >> got; exit 0" TERM; '
    "while :; do sleep 0.05; done"
)


def _start_run(tmp_path: Path, hangup: str = "default") -> subprocess.Popen[bytes]:
    """`ledger run job -- sh -c RELOADS_ON_HUP` in tmp_path, with SIGHUP at
    its default or ignored (as under nohup)."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "job").returncode == 0
    handler = signal.SIG_IGN if hangup == "ignored" else signal.SIG_DFL
    return subprocess.Popen(
        [*ledger_cmd(), "--store", str(store), "run", "job", "--owner", "w", "--lease", "1m",
         "--", "sh", "-c", RELOADS_ON_HUP],
        cwd=tmp_path, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, handler),
    )  # fmt: skip


def test_sighup_stops_the_command_with_sigterm(tmp_path: Path) -> None:
    """A closed terminal: the command is sent SIGTERM, not a SIGHUP it may take
    for "reload", so it stops at once rather than being killed 5 s later."""
    run = _start_run(tmp_path)
    wait_for_file(tmp_path / "pid")
    run.send_signal(signal.SIGHUP)
    assert run.wait(timeout=4) == 128 + signal.SIGHUP
    assert (tmp_path / "got").read_text() == "stopped\n"
    state = json.loads(run_ledger(tmp_path / "store", "state", "job", "--json").stdout)
    assert state["Status"] == "pending" and state["Owner"] == ""


def test_under_nohup_sighup_stays_ignored(tmp_path: Path) -> None:
    run = _start_run(tmp_path, hangup="ignored")
    wait_for_file(tmp_path / "pid")
    run.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        run.wait(timeout=0.5)
    assert not (tmp_path / "got").exists()
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=HANG) == 128 + signal.SIGTERM


def test_run_next_passes_the_exit_status_and_fails_the_task(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "a").returncode == 0
    assert run_ledger(store, "admit", "b", "--needs", "a").returncode == 0
    res = run_ledger(
        store, "--json", "run", "--next", "--owner", "w", "--lease", "1m", "--",
        sys.executable, "-c", "import sys; sys.exit(3)",
    )  # fmt: skip
    assert res.returncode == 3
    doc = json.loads(res.stdout.splitlines()[-1])
    assert doc["key"] == "a" and doc["status"] == "failed" and doc["exit"] == 3
    assert run_ledger(store, "blocked", "b").stdout == "a\n"
    nothing = run_ledger(store, "run", "--next", "--owner", "w", "--lease", "1m", "--", "true")
    assert nothing.returncode == 7


def test_demo(tmp_path: Path) -> None:
    res = subprocess.run(
        [*ledger_cmd(), "demo"],
        capture_output=True, text=True, env=subprocess_env(TMPDIR=str(tmp_path)), timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "\x1b[" not in out
    assert "integration-tests  failed" in out
    assert "└── package  blocked by integration-tests" in out
    store = out.split("The store is kept at ")[1].split(";")[0]
    assert store.startswith(str(tmp_path))
    listing = json.loads(run_ledger(store, "list", "--json").stdout)
    statuses = {r["Key"]: r["Status"] for r in listing}
    assert statuses["integration-tests"] == "failed"
    assert statuses["announce"] == statuses["deploy"] == statuses["package"] == "blocked"
    assert [k for k, s in statuses.items() if s not in ("completed", "failed", "blocked")] == []
    owners = {r["Owner"] for r in listing if r["Status"] == "completed"}
    # The workers did the work (how it spreads between them depends on timing).
    assert owners and owners <= {"worker-1", "worker-2", "worker-3"}


def test_demo_json(tmp_path: Path) -> None:
    res = subprocess.run(
        [*ledger_cmd(), "--json", "demo", "--workers", "2"],
        capture_output=True, text=True, env=subprocess_env(TMPDIR=str(tmp_path)), timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert Path(doc["store"]).is_dir()
    assert {r["worker"] for r in doc["runs"]} <= {"worker-1", "worker-2"}
    assert sorted(r["key"] for r in doc["runs"]) == sorted(
        r["Key"] for r in doc["records"] if r["Status"] in ("completed", "failed")
    )


def test_a_claim_refused_by_a_failed_ancestor_keeps_its_block(tmp_path: Path) -> None:
    """Go's Claim blocks the record before refusing; on the JSON store too."""
    store = tmp_path / "store"
    assert run_ledger(store, "admit", "root").returncode == 0
    assert run_ledger(store, "claim", "root", "--owner", "w", "--lease", "1m").returncode == 0
    done = run_ledger(store, "complete", "root", "--owner", "w", "--fence", "1", "--failed")
    assert done.returncode == 0
    assert run_ledger(store, "admit", "child", "--needs", "mid").returncode == 0  # mid: not yet
    assert run_ledger(store, "admit", "mid", "--needs", "root").returncode == 0  # blocked at once
    assert run_ledger(store, "blocked", "child").returncode == 1  # an escapee, still pending
    refused = run_ledger(store, "claim", "child", "--owner", "w", "--lease", "1m")
    assert refused.returncode == 6
    assert refused.stderr == "ledger: record is not claimed (child is blocked by mid)\n"
    assert run_ledger(store, "blocked", "child").stdout == "mid\n"
    events = json.loads(run_ledger(store, "log", "child", "--json").stdout)
    assert [e["event"] for e in events] == ["ledger.admitted", "ledger.blocked"]
